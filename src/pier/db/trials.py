"""A collection's trial runs: how many of the server's trial-key runs it used."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update

from pier.db.base import StoreBase
from pier.db.tables import trials
from pier.record import utcnow


class TrialStore(StoreBase):
    def trial(self, collection: str) -> tuple[datetime | None, int]:
        """(activated_at, runs_used); (None, 0) for a collection that never used one."""
        query = select(trials.c.activated_at, trials.c.runs_used).where(trials.c.collection == collection)
        with self._read() as connection:
            row = connection.execute(query).first()
        return (None, 0) if row is None else (row.activated_at, row.runs_used)

    def activate_trial(self, collection: str) -> None:
        """Idempotent: the first activation's time is kept."""
        self._ensure(collection)
        statement = (
            update(trials)
            .where(trials.c.collection == collection, trials.c.activated_at.is_(None))
            .values(activated_at=utcnow())
        )
        with self._write() as connection:
            connection.execute(statement)

    def take_trial_run(self, collection: str, limit: int) -> bool:
        """Count one trial run, atomically; False when `limit` are used."""
        self._ensure(collection)
        statement = (
            update(trials)
            .where(trials.c.collection == collection, trials.c.runs_used < limit)
            .values(runs_used=trials.c.runs_used + 1)
        )
        with self._write() as connection:
            return connection.execute(statement).rowcount == 1

    def _ensure(self, collection: str) -> None:
        statement = self._insert(trials).values(collection=collection, activated_at=None, runs_used=0)
        with self._write() as connection:
            connection.execute(statement.on_conflict_do_nothing(index_elements=[trials.c.collection]))
