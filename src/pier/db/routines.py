"""Routines: scheduled runs of a task. Storage only; the schedule arithmetic is
pier.routines'.

Firing a tick is claimed with one conditional UPDATE (`... WHERE next_run_at =
:expected`): of any number of servers that saw the same tick due, exactly one
changes the row, and only that one starts the run. The same holds on SQLite
(one writer at a time) and PostgreSQL (the losers' UPDATE re-reads the row it
waited for and no longer matches).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, delete, select, update
from sqlalchemy.exc import IntegrityError

from pier.db.base import StoreBase
from pier.db.models import RoutineRow, RunRow
from pier.db.schemas import StoredRoutine
from pier.errors import InputError, NotFoundError
from pier.record import Trajectory, utcnow


class RoutineExists(InputError):
    """A routine of that name already exists for the task."""


def _routine(row: RoutineRow) -> StoredRoutine:
    return StoredRoutine.model_validate(row, from_attributes=True)


def _not_found(collection: str, task: str, name: str) -> NotFoundError:
    return NotFoundError(
        f"routine {name!r} not found for task {collection}/{task}: check its name (`pier routine list` "
        f"or GET /api/v1/routines/{collection})"
    )


class RoutineStore(StoreBase):
    def create_routine(self, **fields: Any) -> StoredRoutine:
        """Store a new routine (every RoutineRow column but id and the times).
        RoutineExists when the task has one of that name."""
        now = utcnow()
        row = RoutineRow(**fields, created_at=now, updated_at=now)
        try:
            with self._write() as session:
                session.add(row)
                session.flush()
                return _routine(row)
        except IntegrityError:
            raise RoutineExists(
                f"routine {fields['name']!r} exists for task {fields['collection']}/{fields['task']}: "
                "change it with PATCH, or choose another name"
            ) from None

    def get_routine(self, collection: str, task: str, name: str) -> StoredRoutine:
        query = select(RoutineRow).where(
            RoutineRow.collection == collection, RoutineRow.task == task, RoutineRow.name == name
        )
        with self._read() as session:
            row = session.scalar(query)
        if row is None:
            raise _not_found(collection, task, name)
        return _routine(row)

    def get_routine_by_id(self, routine_id: int) -> StoredRoutine:
        with self._read() as session:
            row = session.get(RoutineRow, routine_id)
        if row is None:
            raise NotFoundError(f"routine {routine_id} not found")
        return _routine(row)

    def list_routines(self, collection: str | None = None, task: str | None = None) -> list[StoredRoutine]:
        query = select(RoutineRow).order_by(RoutineRow.collection, RoutineRow.task, RoutineRow.name)
        if collection is not None:
            query = query.where(RoutineRow.collection == collection)
        if task is not None:
            query = query.where(RoutineRow.task == task)
        with self._read() as session:
            return [_routine(row) for row in session.scalars(query)]

    def update_routine(self, routine_id: int, **fields: Any) -> StoredRoutine:
        """Set the given columns (and updated_at)."""
        statement = update(RoutineRow).where(RoutineRow.id == routine_id)
        with self._write() as session:
            result = cast(CursorResult[Any], session.execute(statement.values(**fields, updated_at=utcnow())))
        if result.rowcount == 0:
            raise NotFoundError(f"routine {routine_id} not found")
        return self.get_routine_by_id(routine_id)

    def delete_routine(self, routine_id: int) -> bool:
        """Forget the routine; the runs it started are kept. False when it was gone."""
        with self._write() as session:
            result = cast(
                CursorResult[Any], session.execute(delete(RoutineRow).where(RoutineRow.id == routine_id))
            )
            return result.rowcount > 0

    def due_routines(self, now: datetime) -> list[StoredRoutine]:
        """Routines with a tick at or before `now`, or asked to run now; oldest first."""
        scheduled = RoutineRow.enabled.is_(True) & (RoutineRow.next_run_at <= now)
        query = select(RoutineRow).where(scheduled | RoutineRow.run_now_at.is_not(None))
        with self._read() as session:
            return [_routine(row) for row in session.scalars(query.order_by(RoutineRow.id))]

    def claim_tick(self, routine_id: int, expected: datetime, next_run_at: datetime, now: datetime) -> bool:
        """Move an enabled routine's tick from `expected` on to `next_run_at`; True
        only for the one caller whose UPDATE did it: that caller fires the tick."""
        statement = (
            update(RoutineRow)
            .where(
                RoutineRow.id == routine_id,
                RoutineRow.enabled.is_(True),
                RoutineRow.next_run_at == expected,
            )
            .values(next_run_at=next_run_at, last_run_at=now, updated_at=now)
        )
        return self._changed(statement)

    def claim_run_now(self, routine_id: int, expected: datetime, now: datetime) -> bool:
        """Clear a run-now request; True only for the caller that cleared it."""
        statement = (
            update(RoutineRow)
            .where(RoutineRow.id == routine_id, RoutineRow.run_now_at == expected)
            .values(run_now_at=None, last_run_at=now, updated_at=now)
        )
        return self._changed(statement)

    def _changed(self, statement: Any) -> bool:
        with self._write() as session:
            return cast(CursorResult[Any], session.execute(statement)).rowcount == 1

    def routine_runs(self, routine: StoredRoutine, limit: int = 20) -> list[Trajectory]:
        """The runs a routine started (its task's runs that name it), newest first."""
        started_by = RunRow.record["triggered_by_routine_id"].as_integer() == routine.id
        query = (
            select(RunRow)
            .where(RunRow.collection == routine.collection, RunRow.task == routine.task, started_by)
            .order_by(RunRow.created_at.desc(), RunRow.trajectory_id.desc())
            .limit(limit)
        )
        with self._read() as session:
            return [Trajectory.model_validate(row.record) for row in session.scalars(query)]
