"""The store's tables as SQLAlchemy 2 typed ORM classes.

The schema itself is owned by the Alembic migrations in `migrations/versions`;
these classes must match them (a unit test compares the two).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, MetaData, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from pier.db.types import BigIntPK, JSONType, UTCDateTime

NAME = 255

# Fixed constraint names, so that the migrations can name (and later alter) them.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSONType,
    }


class RunRow(Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_collection_task_created", "collection", "task", "created_at"),
        Index("ix_runs_status", "status"),
    )

    # A run is keyed by its trajectory id within its collection: the ids pier
    # makes are random (so unique anyway), an id an ingest chose is its
    # collection's own (another collection may choose the same).
    trajectory_id: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    collection: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    task: Mapped[str] = mapped_column(String(NAME))
    status: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    record: Mapped[dict[str, Any]]


class TrialRow(Base):
    """A collection's use of the server's trial keys."""

    __tablename__ = "trials"

    collection: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    activated_at: Mapped[datetime | None]
    runs_used: Mapped[int] = mapped_column(server_default="0")


class RunLabelRow(Base):
    """A label on a run. Apart from the record, so that adding one while the run
    is running cannot race the runner's saves; lists filter on it."""

    __tablename__ = "run_labels"
    __table_args__ = (
        Index("ix_run_labels_trajectory_id", "trajectory_id"),
        Index("ix_run_labels_key", "key"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    trajectory_id: Mapped[str] = mapped_column(String(NAME))
    collection: Mapped[str] = mapped_column(String(NAME), server_default="")  # the run's
    key: Mapped[str] = mapped_column(String(NAME))
    value: Mapped[str] = mapped_column(Text)
    author: Mapped[str] = mapped_column(String(NAME))
    created: Mapped[datetime]


class RunEventRow(Base):
    """One line of a run's log. The unique (trajectory_id, seq) index is also the
    index that reads by run use."""

    __tablename__ = "run_events"
    __table_args__ = (UniqueConstraint("trajectory_id", "seq"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    trajectory_id: Mapped[str] = mapped_column(String(NAME))
    seq: Mapped[int]
    ts: Mapped[datetime]
    stage: Mapped[str | None] = mapped_column(String(64))
    line: Mapped[str] = mapped_column(Text)


class CollectionRow(Base):
    __tablename__ = "collections"

    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    created_at: Mapped[datetime]


class TokenRow(Base):
    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    collection: Mapped[str] = mapped_column(String(NAME), index=True)
    token_hash: Mapped[str] = mapped_column(String(NAME), unique=True)
    created_at: Mapped[datetime]
    label: Mapped[str | None] = mapped_column(String(NAME))


class TaskRow(Base):
    __tablename__ = "tasks"

    collection: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    definition: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    description: Mapped[str] = mapped_column(Text, server_default="")


class CollectionEnvRow(Base):
    __tablename__ = "collection_env"

    collection: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    value_encrypted: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime]


class RunRequestRow(Base):
    """What is needed to start an accepted run again after a restart: its task and
    run parameters (never secret values). Kept until the run ends."""

    __tablename__ = "run_requests"

    trajectory_id: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    created_at: Mapped[datetime]
    request: Mapped[dict[str, Any]]


class RunKeyRow(Base):
    """A client's idempotency key for a run it asked for (the POST's
    `Idempotency-Key` header), per collection: a retry of that POST with the
    same key gets this run back instead of a second one."""

    __tablename__ = "run_keys"

    collection: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    key: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    trajectory_id: Mapped[str] = mapped_column(String(NAME))
    created_at: Mapped[datetime]


class RoutineRow(Base):
    """A scheduled run of a task. `next_run_at` is the tick the scheduler fires
    next (None while paused); a server fires a tick only after moving it on with
    a conditional UPDATE, so two servers never fire the same one. `run_now_at`
    asks any server to fire once now (set by `pier routine run-now`)."""

    __tablename__ = "routines"
    __table_args__ = (
        UniqueConstraint("collection", "task", "name"),
        Index("ix_routines_enabled_next_run_at", "enabled", "next_run_at"),
        # An id is never given again after a delete (SQLite reuses the highest
        # one without it; PostgreSQL's sequence never does): runs name their
        # routine by id, and a new routine must not inherit a deleted one's runs.
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    collection: Mapped[str] = mapped_column(String(NAME))
    task: Mapped[str] = mapped_column(String(NAME))
    name: Mapped[str] = mapped_column(String(NAME))
    description: Mapped[str | None] = mapped_column(Text)
    cron_expression: Mapped[str] = mapped_column(String(NAME))
    timezone: Mapped[str] = mapped_column(String(64))
    init_params: Mapped[dict[str, Any]]
    enabled: Mapped[bool]
    next_run_at: Mapped[datetime | None]
    run_now_at: Mapped[datetime | None]
    last_run_at: Mapped[datetime | None]
    last_trajectory_id: Mapped[str | None] = mapped_column(String(NAME))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class AuditRow(Base):
    """One change a token or a signed-in user made, or tried to (refusals too).
    Names only: a body is never kept, so a secret's value never is."""

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_collection_at", "collection", "at"),
        Index("ix_audit_events_at", "at"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    collection: Mapped[str | None] = mapped_column(String(NAME))
    actor: Mapped[str] = mapped_column(String(NAME))  # "admin", "token:<id>", "anonymous"
    token_id: Mapped[int | None]
    token_name: Mapped[str | None] = mapped_column(String(NAME))
    action: Mapped[str] = mapped_column(String(NAME))  # "POST /api/v1/run/{collection}/{task}"
    target: Mapped[dict[str, Any]] = mapped_column(JSONType)  # the route's path parameters
    status: Mapped[int]
    client: Mapped[str | None] = mapped_column(String(NAME))
    user_agent: Mapped[str | None] = mapped_column(String(NAME))


class CollectionQuotaRow(Base):
    """The admin's overrides of the server's default quotas for one collection
    (only the quotas set: the others follow the server's defaults)."""

    __tablename__ = "collection_quotas"

    collection: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    quotas: Mapped[dict[str, Any]]
    updated_at: Mapped[datetime]


class WebhookDeliveryRow(Base):
    """One webhook to deliver, kept until a receiver took it or its window
    closed. `id` is the delivery id receivers deduplicate on; `leased_until`
    is set while an attempt is open, so no second attempt overlaps it (on this
    server or another)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_state_next_attempt_at", "state", "next_attempt_at"),)

    id: Mapped[str] = mapped_column(String(NAME), primary_key=True)
    collection: Mapped[str] = mapped_column(String(NAME))
    trajectory_id: Mapped[str] = mapped_column(String(NAME))
    url: Mapped[str] = mapped_column(Text)
    sealed_secret: Mapped[str | None] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(32))
    attempts: Mapped[int]
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    next_attempt_at: Mapped[datetime]
    deadline_at: Mapped[datetime]
    leased_until: Mapped[datetime | None]


class ExperimentRow(Base):
    """A task over a matrix (pier.experiments). `definition` is the matrix as
    given, `cells` what it expands to (fixed at creation, so attempts name cells
    by index), `task_definition` the task as it was then. A server works an
    experiment while it holds its lease (`lease_owner` until `lease_until`), so
    two servers on one store never schedule the same experiment at once and a
    server that died hands it on when its lease runs out."""

    __tablename__ = "experiments"
    __table_args__ = (
        Index("ix_experiments_collection_created_at", "collection", "created_at"),
        Index("ix_experiments_status", "status"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    collection: Mapped[str] = mapped_column(String(NAME))
    name: Mapped[str] = mapped_column(String(NAME))
    task: Mapped[str] = mapped_column(String(NAME))
    definition: Mapped[dict[str, Any]]
    task_definition: Mapped[dict[str, Any]]
    cells: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)
    lease_owner: Mapped[str | None] = mapped_column(String(NAME))
    lease_until: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    started_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]


class ExperimentAttemptRow(Base):
    """One try of one attempt of one cell: its run's trajectory id is chosen and
    stored before the run is accepted, so a server that dies in between starts
    that same run (or finds it started), never a second one. `seq` orders the
    attempts (attempt-major, so every cell fills at the same pace); a try that
    failed for an infrastructure reason is followed by one with `retry` + 1."""

    __tablename__ = "experiment_attempts"
    __table_args__ = (
        UniqueConstraint("experiment_id", "seq", "retry"),
        UniqueConstraint("trajectory_id"),
        Index("ix_experiment_attempts_experiment_id_state", "experiment_id", "state"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    experiment_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int]
    cell: Mapped[int]
    attempt: Mapped[int]
    retry: Mapped[int]
    trajectory_id: Mapped[str] = mapped_column(String(NAME))
    state: Mapped[str] = mapped_column(String(16))  # claimed | started | done
    outcome: Mapped[str | None] = mapped_column(String(16))  # success | failure | infra | cancelled
    created_at: Mapped[datetime]
