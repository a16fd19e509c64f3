"""Experiments and their attempts. Storage only; what they mean is pier.experiments'.

Two things keep an experiment's runs exactly once, whatever crashes:
- an attempt's trajectory id is stored (state `claimed`) before its run is
  accepted, under a unique (experiment, seq, retry): whoever starts it after a
  crash starts that same id, and a run that exists is never accepted again;
- a server schedules an experiment only while it holds its lease, taken with a
  conditional UPDATE (free, expired, or already its own).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from pier.db.base import StoreBase
from pier.db.runs import RunStore
from pier.db.schemas import StoredAttempt, StoredExperiment
from pier.db.tables import experiment_attempts, experiments, runs
from pier.errors import NotFoundError
from pier.record import Trajectory, utcnow

BATCH = 500  # ids in one IN (...)


def _experiment(row: Row[Any]) -> StoredExperiment:
    return StoredExperiment.model_validate(row._asdict())


def _attempt(row: Row[Any]) -> StoredAttempt:
    return StoredAttempt.model_validate(row._asdict())


class ExperimentStore(StoreBase):
    def create_experiment(self, **fields: Any) -> StoredExperiment:
        now = utcnow()
        statement = insert(experiments).values(**fields, created_at=now, updated_at=now, started_at=now)
        with self._write() as connection:
            return _experiment(connection.execute(statement.returning(experiments)).one())

    def get_experiment(self, experiment_id: str) -> StoredExperiment:
        with self._read() as connection:
            row = connection.execute(select(experiments).where(experiments.c.id == experiment_id)).first()
        if row is None:
            raise NotFoundError(
                f"experiment {experiment_id!r} not found: check its id (`pier experiment list`)"
            )
        return _experiment(row)

    def list_experiments(self, collection: str | None = None, limit: int = 100) -> list[StoredExperiment]:
        query = select(experiments).order_by(experiments.c.created_at.desc()).limit(limit)
        if collection is not None:
            query = query.where(experiments.c.collection == collection)
        with self._read() as connection:
            return [_experiment(row) for row in connection.execute(query)]

    def experiments_with_status(self, statuses: Iterable[str]) -> list[StoredExperiment]:
        query = select(experiments).where(experiments.c.status.in_(list(statuses)))
        with self._read() as connection:
            return [_experiment(row) for row in connection.execute(query.order_by(experiments.c.created_at))]

    def update_experiment(self, experiment_id: str, **fields: Any) -> StoredExperiment:
        statement = update(experiments).where(experiments.c.id == experiment_id)
        with self._write() as connection:
            result = connection.execute(statement.values(**fields, updated_at=utcnow()))
        if result.rowcount == 0:
            raise NotFoundError(f"experiment {experiment_id!r} not found")
        return self.get_experiment(experiment_id)

    def set_experiment_status(self, experiment_id: str, expected: Iterable[str], **fields: Any) -> bool:
        """Change the experiment only when its status is one of `expected`; True when it did."""
        statement = (
            update(experiments)
            .where(experiments.c.id == experiment_id, experiments.c.status.in_(list(expected)))
            .values(**fields, updated_at=utcnow())
        )
        with self._write() as connection:
            return connection.execute(statement).rowcount == 1

    def take_lease(self, experiment_id: str, owner: str, until: datetime, now: datetime) -> bool:
        """Hold the experiment until `until`, when it is free, expired or `owner`'s already."""
        free = or_(
            experiments.c.lease_owner.is_(None),
            experiments.c.lease_owner == owner,
            experiments.c.lease_until < now,
        )
        statement = (
            update(experiments)
            .where(experiments.c.id == experiment_id, free)
            .values(lease_owner=owner, lease_until=until)
        )
        with self._write() as connection:
            return connection.execute(statement).rowcount == 1

    def release_lease(self, experiment_id: str, owner: str) -> None:
        statement = (
            update(experiments)
            .where(experiments.c.id == experiment_id, experiments.c.lease_owner == owner)
            .values(lease_owner=None, lease_until=None)
        )
        with self._write() as connection:
            connection.execute(statement)

    # attempts

    def claim_attempt(self, experiment_id: str, seq: int, cell: int, attempt: int, retry: int,
                      trajectory_id: str) -> StoredAttempt | None:  # fmt: skip
        """Store a new try with its trajectory id (state claimed); None when that
        (seq, retry) was claimed already."""
        statement = insert(experiment_attempts).values(
            experiment_id=experiment_id, seq=seq, cell=cell, attempt=attempt, retry=retry,
            trajectory_id=trajectory_id, state="claimed", outcome=None, created_at=utcnow(),
        )  # fmt: skip
        try:
            with self._write() as connection:
                return _attempt(connection.execute(statement.returning(experiment_attempts)).one())
        except IntegrityError:
            return None

    def mark_attempt(self, attempt_id: int, state: str, outcome: str | None = None) -> None:
        statement = update(experiment_attempts).where(experiment_attempts.c.id == attempt_id)
        with self._write() as connection:
            connection.execute(statement.values(state=state, outcome=outcome))

    def attempts(self, experiment_id: str, states: Iterable[str] | None = None) -> list[StoredAttempt]:
        table = experiment_attempts
        query = select(table).where(table.c.experiment_id == experiment_id)
        if states is not None:
            query = query.where(table.c.state.in_(list(states)))
        with self._read() as connection:
            rows = connection.execute(query.order_by(table.c.seq, table.c.retry))
            return [_attempt(row) for row in rows]

    def next_seq(self, experiment_id: str) -> int:
        """The first attempt number no try has claimed yet."""
        query = select(func.max(experiment_attempts.c.seq)).where(
            experiment_attempts.c.experiment_id == experiment_id
        )
        with self._read() as connection:
            found = connection.scalar(query)
        return 0 if found is None else found + 1

    def runs_by_id(self, trajectory_ids: Iterable[str]) -> dict[str, Trajectory]:
        """The runs of these ids that exist, with their labels."""
        ids = list(dict.fromkeys(trajectory_ids))
        found: dict[str, Trajectory] = {}
        with self._read() as connection:
            for start in range(0, len(ids), BATCH):
                rows = connection.execute(
                    select(runs).where(runs.c.trajectory_id.in_(ids[start : start + BATCH]))
                )
                found.update((r.trajectory_id, r) for r in RunStore._records(connection, rows.all()))
        return found
