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
from typing import Any

from sqlalchemy import Row, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from pier.db.base import StoreBase
from pier.db.schemas import StoredRoutine
from pier.db.tables import routines, runs
from pier.errors import InputError, NotFoundError
from pier.record import Trajectory, utcnow


class RoutineExists(InputError):
    """A routine of that name already exists for the task."""


def _routine(row: Row[Any]) -> StoredRoutine:
    return StoredRoutine.model_validate(row._asdict())


def _not_found(collection: str, task: str, name: str) -> NotFoundError:
    return NotFoundError(
        f"routine {name!r} not found for task {collection}/{task}: check its name (`pier routine list` "
        f"or GET /api/v1/routines/{collection})"
    )


class RoutineStore(StoreBase):
    def create_routine(self, **fields: Any) -> StoredRoutine:
        """Store a new routine (every `routines` column but id and the times).
        RoutineExists when the task has one of that name."""
        now = utcnow()
        statement = insert(routines).values(**fields, created_at=now, updated_at=now).returning(routines)
        try:
            with self._write() as connection:
                return _routine(connection.execute(statement).one())
        except IntegrityError:
            raise RoutineExists(
                f"routine {fields['name']!r} exists for task {fields['collection']}/{fields['task']}: "
                "change it with PATCH, or choose another name"
            ) from None

    def get_routine(self, collection: str, task: str, name: str) -> StoredRoutine:
        query = select(routines).where(
            routines.c.collection == collection, routines.c.task == task, routines.c.name == name
        )
        with self._read() as connection:
            row = connection.execute(query).first()
        if row is None:
            raise _not_found(collection, task, name)
        return _routine(row)

    def get_routine_by_id(self, routine_id: int) -> StoredRoutine:
        with self._read() as connection:
            row = connection.execute(select(routines).where(routines.c.id == routine_id)).first()
        if row is None:
            raise NotFoundError(f"routine {routine_id} not found")
        return _routine(row)

    def list_routines(self, collection: str | None = None, task: str | None = None) -> list[StoredRoutine]:
        query = select(routines).order_by(routines.c.collection, routines.c.task, routines.c.name)
        if collection is not None:
            query = query.where(routines.c.collection == collection)
        if task is not None:
            query = query.where(routines.c.task == task)
        with self._read() as connection:
            return [_routine(row) for row in connection.execute(query)]

    def update_routine(self, routine_id: int, **fields: Any) -> StoredRoutine:
        """Set the given columns (and updated_at)."""
        statement = update(routines).where(routines.c.id == routine_id)
        with self._write() as connection:
            result = connection.execute(statement.values(**fields, updated_at=utcnow()))
        if result.rowcount == 0:
            raise NotFoundError(f"routine {routine_id} not found")
        return self.get_routine_by_id(routine_id)

    def delete_routine(self, routine_id: int) -> bool:
        """Forget the routine; the runs it started are kept. False when it was gone."""
        with self._write() as connection:
            return connection.execute(delete(routines).where(routines.c.id == routine_id)).rowcount > 0

    def due_routines(self, now: datetime) -> list[StoredRoutine]:
        """Routines with a tick at or before `now`, or asked to run now; oldest first."""
        scheduled = routines.c.enabled.is_(True) & (routines.c.next_run_at <= now)
        query = select(routines).where(scheduled | routines.c.run_now_at.is_not(None))
        with self._read() as connection:
            return [_routine(row) for row in connection.execute(query.order_by(routines.c.id))]

    def claim_tick(self, routine_id: int, expected: datetime, next_run_at: datetime, now: datetime) -> bool:
        """Move an enabled routine's tick from `expected` on to `next_run_at`; True
        only for the one caller whose UPDATE did it: that caller fires the tick."""
        statement = (
            update(routines)
            .where(
                routines.c.id == routine_id,
                routines.c.enabled.is_(True),
                routines.c.next_run_at == expected,
            )
            .values(next_run_at=next_run_at, last_run_at=now, updated_at=now)
        )
        return self._changed(statement)

    def claim_run_now(self, routine_id: int, expected: datetime, now: datetime) -> bool:
        """Clear a run-now request; True only for the caller that cleared it."""
        statement = (
            update(routines)
            .where(routines.c.id == routine_id, routines.c.run_now_at == expected)
            .values(run_now_at=None, last_run_at=now, updated_at=now)
        )
        return self._changed(statement)

    def _changed(self, statement: Any) -> bool:
        with self._write() as connection:
            return connection.execute(statement).rowcount == 1

    def routine_runs(self, routine: StoredRoutine, limit: int = 20) -> list[Trajectory]:
        """The runs a routine started (its task's runs that name it), newest first."""
        started_by = runs.c.record["triggered_by_routine_id"].as_integer() == routine.id
        query = (
            select(runs.c.record)
            .where(runs.c.collection == routine.collection, runs.c.task == routine.task, started_by)
            .order_by(runs.c.created_at.desc(), runs.c.trajectory_id.desc())
            .limit(limit)
        )
        with self._read() as connection:
            return [Trajectory.model_validate(record) for record in connection.scalars(query)]
