"""A collection's trial runs: how many of the server's trial-key runs it used."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, update

from pier.db.base import StoreBase
from pier.db.models import TrialRow
from pier.record import utcnow


class TrialStore(StoreBase):
    def trial(self, collection: str) -> tuple[datetime | None, int]:
        """(activated_at, runs_used); (None, 0) for a collection that never used one."""
        with self._read() as session:
            row = session.get(TrialRow, collection)
        return (None, 0) if row is None else (row.activated_at, row.runs_used)

    def activate_trial(self, collection: str) -> None:
        """Idempotent: the first activation's time is kept."""
        self._ensure(collection)
        statement = (
            update(TrialRow)
            .where(TrialRow.collection == collection, TrialRow.activated_at.is_(None))
            .values(activated_at=utcnow())
        )
        with self._write() as session:
            session.execute(statement)

    def take_trial_run(self, collection: str, limit: int) -> bool:
        """Count one trial run, atomically; False when `limit` are used."""
        self._ensure(collection)
        statement = (
            update(TrialRow)
            .where(TrialRow.collection == collection, TrialRow.runs_used < limit)
            .values(runs_used=TrialRow.runs_used + 1)
        )
        with self._write() as session:
            return cast(CursorResult[Any], session.execute(statement)).rowcount == 1

    def _ensure(self, collection: str) -> None:
        statement = self._insert(TrialRow).values(collection=collection, activated_at=None, runs_used=0)
        with self._write() as session:
            session.execute(statement.on_conflict_do_nothing(index_elements=[TrialRow.collection]))
