"""pier's database: runs, their log events, collections, tokens, tasks,
collection environment, routines, experiments and model usage outside runs. SQLite by default, PostgreSQL for shared deployments.

    store = Store.open(settings.db_url)   # migrates to head
    store.create_run(record); store.append_event(record.trajectory_id, "started")
"""

from __future__ import annotations

from typing import Self

from pier.db.audit import AuditStore
from pier.db.collections import CollectionStore
from pier.db.deliveries import DeliveryStore
from pier.db.engine import create_store_engine, upgrade_to_head
from pier.db.events import EventStore
from pier.db.experiments import ExperimentStore
from pier.db.quotas import QuotaStore
from pier.db.requests import RequestStore
from pier.db.routines import RoutineStore
from pier.db.runs import RunStore
from pier.db.schemas import (
    AuditEntry,
    Collection,
    Event,
    StoredAttempt,
    StoredExperiment,
    StoredRoutine,
    StoredTask,
)
from pier.db.trials import TrialStore
from pier.db.usage import UsageStore

__all__ = [
    "AuditEntry", "Collection", "Event", "Store", "StoredAttempt", "StoredExperiment", "StoredRoutine", "StoredTask",
]  # fmt: skip


class Store(
    RunStore,
    EventStore,
    CollectionStore,
    RequestStore,
    RoutineStore,
    TrialStore,
    QuotaStore,
    DeliveryStore,
    AuditStore,
    ExperimentStore,
    UsageStore,
):
    """Thread-safe: share one instance; each call uses its own connection."""

    @classmethod
    def open(cls, url: str) -> Self:
        """Connect to `url` (sqlite:///PATH or postgresql+psycopg://...) and bring
        its schema to the latest migration. Safe to call from several processes
        at once."""
        engine = create_store_engine(url)
        try:
            upgrade_to_head(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)
