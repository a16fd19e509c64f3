"""The store's plumbing: engine, sessions per call, dialect-aware upserts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Self

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from pier.db.engine import SQLITE_BEGIN, advisory_key


class StoreBase:
    """Holds the engine; every public method opens its own short session, so one
    instance serves any number of threads."""

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
        with self._read() as session:
            session.execute(text("SELECT 1"))

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.engine.url.render_as_string(hide_password=True)!r})"

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def _write(self) -> Iterator[Session]:
        """A session in a transaction that commits on success. On SQLite it holds
        the write lock from its first statement (BEGIN IMMEDIATE)."""
        with self._write_turn, Session(self._writer, expire_on_commit=False) as session, session.begin():
            yield session

    def _insert(self, model: Any) -> Any:
        """INSERT with ON CONFLICT support for the engine's dialect."""
        if self.dialect == "postgresql":
            from sqlalchemy.dialects import postgresql  # loaded only on PostgreSQL

            return postgresql.insert(model)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(model)

    def _lock(self, session: Session, name: str) -> None:
        """Serialise transactions on `name` until commit. SQLite needs nothing:
        write transactions already run one at a time."""
        if self.dialect == "postgresql":
            session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": advisory_key(name)})
