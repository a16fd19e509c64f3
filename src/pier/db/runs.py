"""Runs: the Trajectory as JSON, plus the columns that lists filter and sort on,
and their labels (a table of their own)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, Select, delete, func, insert, select, tuple_, update
from sqlalchemy.exc import IntegrityError

from pier.db.base import StoreBase
from pier.db.tables import run_labels, runs
from pier.errors import InputError, NotFoundError
from pier.record import Label, RunStatus, Trajectory, utcnow

# Where a run's success sits in its stored record (steps.run.outputs.success).
SUCCESS_PATH = ("steps", "run", "outputs", "success")

# A label filter: (key, value), or (key, None) for "has this key".
LabelFilter = tuple[str, str | None]


def run_columns(record: Trajectory) -> dict[str, Any]:
    record.updated = utcnow()
    return {
        "trajectory_id": record.trajectory_id,
        "collection": record.collection,
        "task": record.name,
        "status": RunStatus(record.status).value,
        "created_at": record.created,
        "updated_at": record.updated,
        "record": record.stored(),
    }


_OPEN = (RunStatus.pending.value, RunStatus.running.value)


def _status_values(statuses: Iterable[RunStatus | str]) -> list[str]:
    try:
        return [RunStatus(status).value for status in statuses]
    except ValueError as exc:
        known = ", ".join(s.value for s in RunStatus)
        raise InputError(f"{exc}; a run status is one of: {known}") from None


def _label(row: Row[Any]) -> Label:
    return Label(key=row.key, value=row.value, created=row.created, author=row.author)


class RunStore(StoreBase):
    def create_run(self, record: Trajectory) -> None:
        """Store a new run. InputError when its trajectory id is taken."""
        try:
            with self._write() as connection:
                connection.execute(insert(runs).values(**run_columns(record)))
        except IntegrityError:
            raise InputError(
                f"run {record.trajectory_id!r} already exists: use save_run to update it"
            ) from None

    def save_run(self, record: Trajectory, *, replace_final: bool = False) -> bool:
        """Insert or replace the run (status, record, updated_at), unless the
        stored run has already ended: a status another process made final (a
        cancel, a lost worker, a replica) stays. replace_final writes over an
        ended run too (an ingest re-push replaces what it pushed before). False
        when nothing was written."""
        values = run_columns(record)
        statement = self._insert(runs).values(**values)
        statement = statement.on_conflict_do_update(
            index_elements=[runs.c.trajectory_id, runs.c.collection],
            set_={k: v for k, v in values.items() if k not in ("trajectory_id", "collection")},
            where=None if replace_final else runs.c.status.in_(_OPEN),
        ).returning(runs.c.trajectory_id)
        with self._write() as connection:
            return connection.execute(statement).first() is not None

    def get_run(self, trajectory_id: str, collection: str | None = None) -> Trajectory:
        """The run with that id (in `collection`, when given). NotFoundError when
        there is none, or, without a collection, when several collections
        have chosen that id for runs they ingested: name the collection then.
        The ids pier makes are random, so are one run's wherever they are used."""
        return self.get_run_seen(trajectory_id, collection)[0]

    def get_run_seen(self, trajectory_id: str, collection: str | None = None) -> tuple[Trajectory, datetime]:
        """The run (as get_run) and the stored `updated_at` it was read at: the
        version `swap_run` compares with."""
        query = select(runs).where(runs.c.trajectory_id == trajectory_id)
        if collection is not None:
            query = query.where(runs.c.collection == collection)
        with self._read() as connection:
            rows = connection.execute(query.limit(2)).all()
            if len(rows) != 1:
                where = "" if collection is None else f" in {collection}"
                hint = "check the trajectory id" if not rows else "name its collection"
                raise NotFoundError(f"run {trajectory_id!r} not found{where}: {hint}")
            return self._records(connection, rows)[0], rows[0].updated_at

    def swap_run(self, record: Trajectory, seen: datetime) -> bool:
        """Compare-and-set: replace the stored run (ended or not) only when its
        `updated_at` is still `seen` (from get_run_seen), in one conditional
        UPDATE, so of two processes that read the same version and both write,
        exactly one does. False when another write came first (read again)."""
        values = run_columns(record)
        if values["updated_at"] <= seen:  # a clock at the same microsecond: the version still moves on
            record.updated = values["updated_at"] = seen + timedelta(microseconds=1)
            values["record"] = record.stored()
        statement = (
            update(runs)
            .where(
                runs.c.trajectory_id == record.trajectory_id,
                runs.c.collection == record.collection,
                runs.c.updated_at == seen,
            )
            .values(**{k: v for k, v in values.items() if k not in ("trajectory_id", "collection")})
        )
        with self._write() as connection:
            return connection.execute(statement).rowcount == 1

    def runs_with_id(self, trajectory_id: str) -> list[Trajectory]:
        """Every run with that trajectory id: one, or several collections' own
        ingested runs that chose the same id. The caller picks the one it may see."""
        query = select(runs).where(runs.c.trajectory_id == trajectory_id).order_by(runs.c.collection)
        with self._read() as connection:
            return self._records(connection, connection.execute(query).all())

    def run_collections(self) -> list[str]:
        """Every collection that has runs, stored as a collection or not (`local`)."""
        with self._read() as connection:
            return sorted(connection.scalars(select(runs.c.collection).distinct()))

    def run_ids_starting(self, prefix: str, limit: int = 10) -> list[str]:
        """The trajectory ids that start with `prefix` (at most `limit`, sorted):
        a shortened id (as a narrow table shows it) finds its run."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = (
            select(runs.c.trajectory_id)
            .where(runs.c.trajectory_id.like(f"{escaped}%", escape="\\"))
            .order_by(runs.c.trajectory_id)
            .limit(limit)
        )
        with self._read() as connection:
            return list(connection.scalars(query))

    def list_runs(
        self,
        collection: str | None = None,
        task: str | None = None,
        limit: int = 20,
        offset: int = 0,
        statuses: Iterable[RunStatus | str] | None = None,
        labels: Iterable[LabelFilter] = (),
        since: datetime | None = None,
        until: datetime | None = None,
        success: bool | None = None,
    ) -> tuple[list[Trajectory], int]:
        """One page of runs, newest first, and how many match in all. A run
        matches `labels` when it has every one of them; `since`/`until` bound
        its creation time (until excluded); `success` keeps the runs whose
        recorded success is that (runs without one match neither)."""
        if limit < 0 or offset < 0:
            raise InputError(f"limit and offset must be >= 0 (got limit={limit}, offset={offset})")
        query = self._runs_query(collection, task, statuses)
        if since is not None:
            query = query.where(runs.c.created_at >= since)
        if until is not None:
            query = query.where(runs.c.created_at < until)
        if success is not None:
            query = query.where(runs.c.record[SUCCESS_PATH].as_boolean() == success)
        for key, value in labels:
            has = select(run_labels.c.trajectory_id, run_labels.c.collection).where(run_labels.c.key == key)
            if value is not None:
                has = has.where(run_labels.c.value == value)
            query = query.where(tuple_(runs.c.trajectory_id, runs.c.collection).in_(has))
        page = query.order_by(runs.c.created_at.desc(), runs.c.trajectory_id.desc())
        with self._read() as connection:
            total = connection.scalar(select(func.count()).select_from(query.subquery())) or 0
            rows = connection.execute(page.limit(limit).offset(offset)).all()
            return self._records(connection, rows), total

    def count_with_status(self, statuses: Iterable[RunStatus | str]) -> int:
        """How many runs have one of these statuses (an index read: cheap enough per scrape)."""
        query = select(func.count()).select_from(runs).where(runs.c.status.in_(_status_values(statuses)))
        with self._read() as connection:
            return int(connection.scalar(query) or 0)

    def runs_with_status(self, statuses: Iterable[RunStatus | str]) -> list[Trajectory]:
        """Every run in one of `statuses`, oldest first (e.g. to recover after a crash)."""
        query = self._runs_query(None, None, statuses).order_by(runs.c.created_at, runs.c.trajectory_id)
        with self._read() as connection:
            return self._records(connection, connection.execute(query).all())

    def add_labels(
        self,
        trajectory_id: str,
        labels: Iterable[Label],
        replace: bool = False,
        collection: str | None = None,
    ) -> None:
        """Add labels to an existing run (of `collection`, when given: see
        get_run); with replace, its labels become these."""
        collection = self.get_run(trajectory_id, collection).collection
        rows = [
            {"trajectory_id": trajectory_id, "collection": collection, "key": lb.key, "value": lb.value,
             "author": lb.author, "created": lb.created}
            for lb in labels
        ]  # fmt: skip
        with self._write() as connection:
            if replace:
                connection.execute(
                    delete(run_labels).where(
                        run_labels.c.trajectory_id == trajectory_id, run_labels.c.collection == collection
                    )
                )
            if rows:
                connection.execute(insert(run_labels), rows)

    @staticmethod
    def _records(connection: Connection, rows: Sequence[Row[Any]]) -> list[Trajectory]:
        """The `runs` rows as records, each with its labels (oldest first)."""
        keys = [(row.trajectory_id, row.collection) for row in rows]
        labels: dict[tuple[str, str], list[Label]] = {key: [] for key in keys}
        if keys:
            query = (
                select(run_labels)
                .where(run_labels.c.trajectory_id.in_({tid for tid, _ in keys}))
                .order_by(run_labels.c.id)
            )
            for label in connection.execute(query):
                found = labels.get((label.trajectory_id, label.collection))
                if found is not None:
                    found.append(_label(label))
        return [
            Trajectory.model_validate({**row.record, "labels": labels[(row.trajectory_id, row.collection)]})
            for row in rows
        ]

    def _runs_query(
        self,
        collection: str | None,
        task: str | None,
        statuses: Iterable[RunStatus | str] | None,
    ) -> Select[Any]:
        query = select(runs)
        if collection is not None:
            query = query.where(runs.c.collection == collection)
        if task is not None:
            query = query.where(runs.c.task == task)
        if statuses is not None:
            query = query.where(runs.c.status.in_(_status_values(statuses)))
        return query
