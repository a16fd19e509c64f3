"""Accepted runs' requests, kept until the run ends so that a restarted server
can start its pending runs again. The caller decides what goes in a request;
it must hold no secret values."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from pier.db.base import StoreBase
from pier.db.runs import run_columns
from pier.db.tables import run_events, run_keys, run_labels, run_requests, runs
from pier.errors import InputError, PierError
from pier.record import RunStatus, Trajectory


class QueueFull(PierError):
    """The collection already has `waiting` pending runs, its `max_pending`:
    the run was not stored."""

    def __init__(self, collection: str, waiting: int):
        super().__init__(f"collection {collection!r} has {waiting} runs waiting")
        self.collection = collection
        self.waiting = waiting


class RequestStore(StoreBase):
    def enqueue_run(
        self,
        record: Trajectory,
        request: dict[str, Any],
        key: str | None = None,
        *,
        max_pending: int | None = None,
    ) -> str:
        """Store a new pending run, its labels and its request in one transaction,
        so none exists without the others; with a client's idempotency `key`, the run's
        id under it too. The id of the run stored: another's when `key` already
        names one in the run's collection (nothing is stored then).

        With `max_pending`, QueueFull (nothing stored) when the collection already
        has that many pending runs. The count and the insert are one step: the
        transaction holds the collection's lock from before the count until it
        commits (on SQLite the database's write lock, which BEGIN IMMEDIATE takes
        first; on PostgreSQL a transaction-scoped advisory lock per collection,
        which every server sharing the database takes), so two accepts, on one
        server or on several, never both take the last place."""
        try:
            with self._write() as connection:
                self._lock(connection, f"enqueue:{record.collection}")
                if key is not None:
                    keyed = self._run_for_key(connection, record.collection, key)
                    if keyed is not None:  # a retry of the same request got here first
                        return keyed
                if max_pending is not None:
                    waiting = int(
                        connection.scalar(
                            select(func.count()).where(
                                runs.c.collection == record.collection,
                                runs.c.status == RunStatus.pending.value,
                            )
                        )
                        or 0
                    )
                    if waiting >= max_pending:
                        raise QueueFull(record.collection, waiting)
                connection.execute(insert(runs).values(**run_columns(record)))
                connection.execute(
                    insert(run_requests).values(
                        trajectory_id=record.trajectory_id, created_at=record.created, request=request
                    )
                )
                if key is not None:
                    connection.execute(insert(run_keys).values(collection=record.collection, key=key,
                                       trajectory_id=record.trajectory_id, created_at=record.created))  # fmt: skip
                labels = [
                    {"trajectory_id": record.trajectory_id, "collection": record.collection,
                     "key": label.key, "value": label.value, "author": label.author, "created": label.created}
                    for label in record.labels
                ]  # fmt: skip
                if labels:
                    connection.execute(insert(run_labels), labels)
        except IntegrityError:
            taken = None if key is None else self.run_for_key(record.collection, key)
            if taken is not None:  # a retry of the same request raced this one
                return taken
            raise InputError(
                f"run {record.trajectory_id!r} already exists: use a new trajectory id"
            ) from None
        return record.trajectory_id

    def run_for_key(self, collection: str, key: str) -> str | None:
        """The run a client's idempotency key names in `collection`, if any."""
        with self._read() as connection:
            return self._run_for_key(connection, collection, key)

    @staticmethod
    def _run_for_key(connection: Connection, collection: str, key: str) -> str | None:
        query = select(run_keys.c.trajectory_id).where(
            run_keys.c.collection == collection, run_keys.c.key == key
        )
        return connection.scalar(query)

    def drop_run(self, trajectory_id: str) -> None:
        """Remove a run that was never accepted (its submission failed): its
        record, request, key and log. Idempotent."""
        with self._write() as connection:
            for table in (run_keys, run_requests, run_events, run_labels, runs):
                connection.execute(delete(table).where(table.c.trajectory_id == trajectory_id))

    def run_request(self, trajectory_id: str) -> dict[str, Any] | None:
        query = select(run_requests.c.request).where(run_requests.c.trajectory_id == trajectory_id)
        with self._read() as connection:
            request = connection.scalar(query)
        return None if request is None else dict(request)

    def run_requests(self) -> dict[str, dict[str, Any]]:
        """Every kept request by trajectory id."""
        query = select(run_requests.c.trajectory_id, run_requests.c.request)
        with self._read() as connection:
            rows = connection.execute(query).all()
        return {row.trajectory_id: dict(row.request) for row in rows}

    def drop_run_request(self, trajectory_id: str) -> None:
        """Forget the request of a run that ended. Idempotent."""
        with self._write() as connection:
            connection.execute(delete(run_requests).where(run_requests.c.trajectory_id == trajectory_id))
