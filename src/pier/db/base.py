"""The store's plumbing: engine, a connection per call, dialect-aware upserts.

The store speaks SQLAlchemy Core (`pier.db.tables`): its rows are plain values,
and the ORM's import alone was a good part of a read-only command's start-up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Self

from sqlalchemy import Connection, Engine, Table, text

from pier.db.engine import SQLITE_BEGIN, advisory_key


class StoreBase:
    """Holds the engine; every public method opens its own short connection (a
    transaction of its own), so one instance serves any number of threads."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._writer = engine.execution_options(**{SQLITE_BEGIN: "IMMEDIATE"})
        # SQLite takes one writer at a time, and a writer that finds the lock taken
        # sleeps in growing steps (up to 100 ms) before it tries again: under a
        # busy server that sleep, not the work, is most of a write's time. Threads
        # of this process queue here instead and are woken the moment it is free.
        self._write_turn: AbstractContextManager[object] = (
            threading.RLock() if engine.dialect.name == "sqlite" else nullcontext()
        )

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def ping(self) -> None:
        """Raise the driver's error when the database does not answer a trivial query."""
        with self._read() as connection:
            connection.execute(text("SELECT 1"))

    def free_bytes(self) -> int | None:
        """Free space on the SQLite database's filesystem (None on PostgreSQL,
        whose disk is its server's): a full disk leaves reads working and
        fails every write."""
        if self.dialect != "sqlite":
            return None
        import shutil
        from pathlib import Path

        database = self.engine.url.database or ""
        if not database or database.startswith("file:"):
            return None
        return shutil.disk_usage(Path(database).expanduser().parent).free

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.engine.url.render_as_string(hide_password=True)!r})"

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """A connection whose transaction is rolled back (and the connection given
        back to the pool) when the block ends."""
        with self.engine.connect() as connection:
            yield connection

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A connection in a transaction that commits on success and rolls back on
        an error. On SQLite it holds the write lock from the start (BEGIN IMMEDIATE)."""
        with self._write_turn, self._writer.begin() as connection:
            yield connection

    def _insert(self, table: Table) -> Any:
        """INSERT with ON CONFLICT support for the engine's dialect."""
        if self.dialect == "postgresql":
            from sqlalchemy.dialects import postgresql  # loaded only on PostgreSQL

            return postgresql.insert(table)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)

    def _lock(self, connection: Connection, name: str) -> None:
        """Serialise transactions on `name` until commit. SQLite needs nothing:
        write transactions already run one at a time."""
        if self.dialect == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": advisory_key(name)})
