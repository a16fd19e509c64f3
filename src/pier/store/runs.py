"""Runs: the RunRecord as JSON, plus the columns that lists filter and sort on."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.exc import IntegrityError

from pier.errors import InputError, NotFoundError
from pier.record import RunRecord, RunStatus, utcnow
from pier.store.base import StoreBase
from pier.store.models import RunRow


def run_columns(record: RunRecord) -> dict[str, Any]:
    return {
        "trajectory_id": record.trajectory_id,
        "collection": record.collection,
        "task": record.task,
        "status": RunStatus(record.status).value,
        "created_at": record.created_at,
        "updated_at": utcnow(),
        "record": {**record.model_dump(mode="json"), "owner": record.owner},  # owner: excluded from dumps
    }


def _status_values(statuses: Iterable[RunStatus | str]) -> list[str]:
    try:
        return [RunStatus(status).value for status in statuses]
    except ValueError as exc:
        known = ", ".join(s.value for s in RunStatus)
        raise InputError(f"{exc}; a run status is one of: {known}") from None


def _record(row: RunRow) -> RunRecord:
    return RunRecord.model_validate(row.record)


class RunStore(StoreBase):
    def create_run(self, record: RunRecord) -> None:
        """Store a new run. InputError when its trajectory id is taken."""
        try:
            with self._write() as session:
                session.execute(self._insert(RunRow).values(**run_columns(record)))
        except IntegrityError:
            raise InputError(
                f"run {record.trajectory_id!r} already exists: use save_run to update it"
            ) from None

    def save_run(self, record: RunRecord) -> None:
        """Insert or replace the run (status, record, updated_at)."""
        values = run_columns(record)
        statement = self._insert(RunRow).values(**values)
        statement = statement.on_conflict_do_update(
            index_elements=[RunRow.trajectory_id],
            set_={k: v for k, v in values.items() if k != "trajectory_id"},
        )
        with self._write() as session:
            session.execute(statement)

    def get_run(self, trajectory_id: str) -> RunRecord:
        """The run. NotFoundError when there is none with that id."""
        with self._read() as session:
            row = session.get(RunRow, trajectory_id)
        if row is None:
            raise NotFoundError(f"run {trajectory_id!r} not found: check the trajectory id")
        return _record(row)

    def list_runs(
        self,
        collection: str | None = None,
        task: str | None = None,
        limit: int = 20,
        offset: int = 0,
        statuses: Iterable[RunStatus | str] | None = None,
    ) -> tuple[list[RunRecord], int]:
        """One page of runs, newest first, and how many match in all."""
        if limit < 0 or offset < 0:
            raise InputError(f"limit and offset must be >= 0 (got limit={limit}, offset={offset})")
        query = self._runs_query(collection, task, statuses)
        page = query.order_by(RunRow.created_at.desc(), RunRow.trajectory_id.desc())
        with self._read() as session:
            total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
            rows = session.scalars(page.limit(limit).offset(offset)).all()
        return [_record(row) for row in rows], total

    def runs_with_status(self, statuses: Iterable[RunStatus | str]) -> list[RunRecord]:
        """Every run in one of `statuses`, oldest first (e.g. to recover after a crash)."""
        query = self._runs_query(None, None, statuses).order_by(RunRow.created_at, RunRow.trajectory_id)
        with self._read() as session:
            return [_record(row) for row in session.scalars(query)]

    def _runs_query(
        self,
        collection: str | None,
        task: str | None,
        statuses: Iterable[RunStatus | str] | None,
    ) -> Select[RunRow]:
        query = select(RunRow)
        if collection is not None:
            query = query.where(RunRow.collection == collection)
        if task is not None:
            query = query.where(RunRow.task == task)
        if statuses is not None:
            query = query.where(RunRow.status.in_(_status_values(statuses)))
        return query
