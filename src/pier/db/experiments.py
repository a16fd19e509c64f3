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
from typing import Any, cast

from sqlalchemy import CursorResult, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from pier.db.base import StoreBase
from pier.db.models import ExperimentAttemptRow, ExperimentRow, RunRow
from pier.db.runs import RunStore
from pier.db.schemas import StoredAttempt, StoredExperiment
from pier.errors import NotFoundError
from pier.record import Trajectory, utcnow

BATCH = 500  # ids in one IN (...)


def _experiment(row: ExperimentRow) -> StoredExperiment:
    return StoredExperiment.model_validate(row, from_attributes=True)


def _attempt(row: ExperimentAttemptRow) -> StoredAttempt:
    return StoredAttempt.model_validate(row, from_attributes=True)


class ExperimentStore(StoreBase):
    def create_experiment(self, **fields: Any) -> StoredExperiment:
        now = utcnow()
        row = ExperimentRow(**fields, created_at=now, updated_at=now, started_at=now)
        with self._write() as session:
            session.add(row)
            session.flush()
            return _experiment(row)

    def get_experiment(self, experiment_id: str) -> StoredExperiment:
        with self._read() as session:
            row = session.get(ExperimentRow, experiment_id)
        if row is None:
            raise NotFoundError(
                f"experiment {experiment_id!r} not found: check its id (`pier experiment list`)"
            )
        return _experiment(row)

    def list_experiments(self, collection: str | None = None, limit: int = 100) -> list[StoredExperiment]:
        query = select(ExperimentRow).order_by(ExperimentRow.created_at.desc()).limit(limit)
        if collection is not None:
            query = query.where(ExperimentRow.collection == collection)
        with self._read() as session:
            return [_experiment(row) for row in session.scalars(query)]

    def experiments_with_status(self, statuses: Iterable[str]) -> list[StoredExperiment]:
        query = select(ExperimentRow).where(ExperimentRow.status.in_(list(statuses)))
        with self._read() as session:
            return [_experiment(row) for row in session.scalars(query.order_by(ExperimentRow.created_at))]

    def update_experiment(self, experiment_id: str, **fields: Any) -> StoredExperiment:
        statement = update(ExperimentRow).where(ExperimentRow.id == experiment_id)
        with self._write() as session:
            result = cast(CursorResult[Any], session.execute(statement.values(**fields, updated_at=utcnow())))
        if result.rowcount == 0:
            raise NotFoundError(f"experiment {experiment_id!r} not found")
        return self.get_experiment(experiment_id)

    def set_experiment_status(self, experiment_id: str, expected: Iterable[str], **fields: Any) -> bool:
        """Change the experiment only when its status is one of `expected`; True when it did."""
        statement = (
            update(ExperimentRow)
            .where(ExperimentRow.id == experiment_id, ExperimentRow.status.in_(list(expected)))
            .values(**fields, updated_at=utcnow())
        )
        with self._write() as session:
            return cast(CursorResult[Any], session.execute(statement)).rowcount == 1

    def take_lease(self, experiment_id: str, owner: str, until: datetime, now: datetime) -> bool:
        """Hold the experiment until `until`, when it is free, expired or `owner`'s already."""
        free = or_(
            ExperimentRow.lease_owner.is_(None),
            ExperimentRow.lease_owner == owner,
            ExperimentRow.lease_until < now,
        )
        statement = (
            update(ExperimentRow)
            .where(ExperimentRow.id == experiment_id, free)
            .values(lease_owner=owner, lease_until=until)
        )
        with self._write() as session:
            return cast(CursorResult[Any], session.execute(statement)).rowcount == 1

    def release_lease(self, experiment_id: str, owner: str) -> None:
        statement = (
            update(ExperimentRow)
            .where(ExperimentRow.id == experiment_id, ExperimentRow.lease_owner == owner)
            .values(lease_owner=None, lease_until=None)
        )
        with self._write() as session:
            session.execute(statement)

    # attempts

    def claim_attempt(self, experiment_id: str, seq: int, cell: int, attempt: int, retry: int,
                      trajectory_id: str) -> StoredAttempt | None:  # fmt: skip
        """Store a new try with its trajectory id (state claimed); None when that
        (seq, retry) was claimed already."""
        row = ExperimentAttemptRow(
            experiment_id=experiment_id, seq=seq, cell=cell, attempt=attempt, retry=retry,
            trajectory_id=trajectory_id, state="claimed", outcome=None, created_at=utcnow(),
        )  # fmt: skip
        try:
            with self._write() as session:
                session.add(row)
                session.flush()
                return _attempt(row)
        except IntegrityError:
            return None

    def mark_attempt(self, attempt_id: int, state: str, outcome: str | None = None) -> None:
        statement = update(ExperimentAttemptRow).where(ExperimentAttemptRow.id == attempt_id)
        with self._write() as session:
            session.execute(statement.values(state=state, outcome=outcome))

    def attempts(self, experiment_id: str, states: Iterable[str] | None = None) -> list[StoredAttempt]:
        query = select(ExperimentAttemptRow).where(ExperimentAttemptRow.experiment_id == experiment_id)
        if states is not None:
            query = query.where(ExperimentAttemptRow.state.in_(list(states)))
        with self._read() as session:
            rows = session.scalars(query.order_by(ExperimentAttemptRow.seq, ExperimentAttemptRow.retry))
            return [_attempt(row) for row in rows]

    def next_seq(self, experiment_id: str) -> int:
        """The first attempt number no try has claimed yet."""
        query = select(func.max(ExperimentAttemptRow.seq)).where(
            ExperimentAttemptRow.experiment_id == experiment_id
        )
        with self._read() as session:
            found = session.scalar(query)
        return 0 if found is None else found + 1

    def runs_by_id(self, trajectory_ids: Iterable[str]) -> dict[str, Trajectory]:
        """The runs of these ids that exist, with their labels."""
        ids = list(dict.fromkeys(trajectory_ids))
        found: dict[str, Trajectory] = {}
        with self._read() as session:
            for start in range(0, len(ids), BATCH):
                rows = session.scalars(
                    select(RunRow).where(RunRow.trajectory_id.in_(ids[start : start + BATCH]))
                )
                found.update((r.trajectory_id, r) for r in RunStore._records(session, rows.all()))
        return found
