"""A store whose calls outlast a short database outage: a call that fails
because the database does not answer (the connection refused or dropped, a
server restarting, a disk that is full for a moment) is tried again with a
growing wait, for up to a budget, each try logged; past the budget the
driver's error is raised as it came. Errors that are the caller's (a missing
run, a constraint) are raised at once.

The lifecycle writes through it (a run's record and log, a worker's and the
control activities' bookkeeping): a database stopped for 20 s then costs the
runs a pause, not their end. The API's requests use the plain store: a client
is better told at once than kept waiting for a minute."""

from __future__ import annotations

import functools
import logging
import random
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_WAIT_SEC = 0.5
MAX_WAIT_SEC = 5.0


def driver_errors() -> tuple[type[Exception], ...]:
    """What the database's drivers raise (SQLAlchemy's wrapping, and psycopg's
    own for the plain connections that LISTEN): for a caller above pier.db to
    catch without importing them, then ask `unreachable`."""
    import psycopg

    return (DBAPIError, psycopg.Error)


def transient(exc: BaseException) -> bool:
    """Whether `exc` says the database did not answer (worth trying again)."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    # psycopg's own errors, from the plain connections that LISTEN. Not imported
    # here: a SQLite store never loads the driver, and no psycopg error can
    # exist before psycopg is loaded.
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def unreachable(exc: BaseException) -> BaseException | None:
    """The error in `exc` or what it was raised from (its cause, the error it
    was raised while handling, a group's members) that says the database did
    not answer; None when none does."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if transient(current):
            return current
        if current.__cause__ is not None:
            todo.append(current.__cause__)
        if current.__context__ is not None and not current.__suppress_context__:  # `from None` hides it
            todo.append(current.__context__)
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
    return None


def retried(call: Callable[[], T], budget_sec: float, what: str) -> T:
    """`call()`, tried again while it fails transiently, for up to `budget_sec`."""
    deadline = time.monotonic() + budget_sec
    wait, tries = FIRST_WAIT_SEC, 0
    while True:
        try:
            result = call()
        except Exception as exc:
            tries += 1
            left = deadline - time.monotonic()
            if not transient(exc) or left <= 0:
                if tries > 1:
                    log.error("database: %s failed %d time(s) over %.0fs; giving up: %s",
                              what, tries, budget_sec, _first_line(exc))  # fmt: skip
                raise
            pause = min(wait, left) * random.uniform(0.8, 1.0)
            log.warning("database: %s failed (%s); trying again in %.1fs", what, _first_line(exc), pause)
            time.sleep(pause)
            wait = min(wait * 2, MAX_WAIT_SEC)
            continue
        if tries:
            log.info("database: %s succeeded after %d failed tr%s", what, tries, "y" if tries == 1 else "ies")
        return result


def log_failed_round(logger: logging.Logger, what: str, exc: BaseException) -> None:
    """A background loop's round failed with `exc` and the loop goes on. A
    database that does not answer is an expected fault (docs/faults.md): one
    line saying so, not a stack trace per round for the whole outage; any
    other error keeps its trace, for whoever must fix it."""
    cause = unreachable(exc)
    if cause is not None:
        logger.warning(
            "%s: the database is unreachable (%s); trying again next round", what, _first_line(cause)
        )
    else:
        logger.error("%s", what, exc_info=exc)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


class RetryingStore:
    """Every public method of `store`, retried as `retried` does. Other
    attributes (engine, dialect) are the store's own."""

    def __init__(self, store: Any, budget_sec: float):
        self._store = store
        self._budget = budget_sec

    @property
    def plain(self) -> Any:
        """The store itself, whose calls fail at once."""
        return self._store

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name.startswith("_") or not callable(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            return retried(lambda: attr(*args, **kwargs), self._budget, name)

        return call


DISK_FULL = ("database or disk is full", "no space left on device", "disk full")


def disk_full(exc: BaseException) -> bool:
    """Whether the database's error says its disk is full."""
    return any(words in str(exc).lower() for words in DISK_FULL)


def outage_message(exc: BaseException, budget_sec: float | None = None) -> str | None:
    """`exc` in an operator's words when it says the database did not answer
    (or its disk is full): what happened and what to do, with the driver's
    first line but no SQLAlchemy link; None for any other error."""
    cause = unreachable(exc)
    if cause is None:
        return None
    said = f"{type(cause).__name__}: {_first_line(cause)}"
    if disk_full(cause):
        return f"the database's disk is full ({said}): free space where the database lives, then run it again"
    waited = f" for {budget_sec:g}s (PIER_DB_RETRY_SEC)" if budget_sec else ""
    return (
        f"the database did not answer{waited}: it is down or unreachable ({said}); "
        "run it again once it answers (GET /health/ready says when)"
    )
