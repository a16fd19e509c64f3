"""Engines for pier's two databases and the programmatic Alembic upgrade.

SQLite: WAL so readers never block the writer, a busy timeout so writers queue
instead of failing, and pysqlite's own transaction handling switched off so
that pier decides how each transaction begins: writes open with BEGIN
IMMEDIATE (take the write lock first), which rules out the lock-upgrade
deadlock that a read-then-write transaction otherwise hits under concurrency.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, make_url

from pier.errors import DatabaseTooNew, InputError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
VERSION_TABLE = "pier_alembic_version"
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Execution option read by the SQLite "begin" hook: DEFERRED or IMMEDIATE.
SQLITE_BEGIN = "pier_sqlite_begin"


def advisory_key(name: str) -> int:
    """A stable signed 64-bit key for pg_advisory_xact_lock."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# How long a connect to PostgreSQL may take before it fails. libpq's default is
# to wait for ever, so a server that takes the TCP connection and then says
# nothing (frozen, or behind a path that drops its answers) would hang every
# request and run that needs the store; bounded, the caller gets the driver's
# error, which the API answers 503 and a run's writes retry (pier.db.retry). A
# URL that names its own `connect_timeout` keeps it.
CONNECT_TIMEOUT_SEC = 10


# How long one of pier's sessions may sit inside a transaction without sending
# the next statement before PostgreSQL ends it. pier's transactions are a few
# statements long; one idle this long belongs to a process that froze inside it
# (SIGSTOP, a paused VM, a debugger) and holds its locks, the advisory ones too:
# every other replica's write to that run or collection would wait behind it
# for as long as it stays frozen. Ended, its locks go, the others go on, and the
# frozen process's own write fails when it wakes and is tried again
# (pier.db.retry). A URL whose `options` name their own
# idle_in_transaction_session_timeout keep it.
IDLE_IN_TRANSACTION_SEC = 20


def _bounded(url: URL) -> URL:
    query: dict[str, str] = {}
    if "connect_timeout" not in url.query:
        query["connect_timeout"] = str(CONNECT_TIMEOUT_SEC)
    options = url.query.get("options", "")
    options = options if isinstance(options, str) else " ".join(options)
    if "idle_in_transaction_session_timeout" not in options:
        idle = f"-c idle_in_transaction_session_timeout={int(IDLE_IN_TRANSACTION_SEC * 1000)}"
        query["options"] = f"{options} {idle}".strip()
    return url.update_query_dict(query) if query else url


def conninfo(database_url: str) -> str:
    """A libpq conninfo (key=value) from a SQLAlchemy URL (postgresql+psycopg://...), for a
    plain psycopg connection (LISTEN/NOTIFY), with the connect bound."""
    from psycopg.conninfo import make_conninfo  # loaded only on PostgreSQL

    url = _bounded(make_url(database_url))
    # key=value, not a URL: a libpq URL reads "+" as itself, not as the space
    # between two `-c` options
    params = url.translate_connect_args(username="user", database="dbname")
    query = {k: v if isinstance(v, str) else v[-1] for k, v in url.query.items()}
    return make_conninfo("", **params, **query)


def is_postgres(database_url: str) -> bool:
    return make_url(database_url).get_backend_name() == "postgresql"


def create_store_engine(url: str) -> Engine:
    """An engine for a `sqlite:///path` or `postgresql+psycopg://...` URL."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed)
    if backend == "postgresql":
        return create_engine(_bounded(parsed), pool_pre_ping=True)
    raise InputError(
        f"unsupported database URL {parsed.render_as_string()!r}: "
        "pier's store runs on sqlite:///PATH or postgresql+psycopg://USER:PASS@HOST/DB"
    )


def _sqlite_engine(url: URL) -> Engine:
    database = url.database or ""
    if database in ("", ":memory:") or url.query.get("mode") == "memory":
        raise InputError(
            "an in-memory SQLite store is not shared between connections: "
            "give a file path, e.g. sqlite:///tmp/pier.db"
        )
    if not database.startswith("file:"):
        _private_file(Path(database).expanduser())
    engine = create_engine(
        url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
    )
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def _private_file(path: Path) -> None:
    """The database file made (or tightened to) 0600 before SQLite opens it: its
    -wal and -shm files take the same mode."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Only when it is missing: closing a descriptor of the file drops every POSIX
    # lock this process holds on it, SQLite's too, so opening a second store on a
    # file whose first store is writing would let another process corrupt it.
    if not path.exists():
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # pier emits BEGIN itself (_sqlite_on_begin)
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")  # durable enough in WAL, much faster
    finally:
        cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    mode = connection.get_execution_options().get(SQLITE_BEGIN, "DEFERRED")
    connection.exec_driver_sql(f"BEGIN {mode}")


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's config without an ini file; env.py takes `connection` from it."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


_REVISION = re.compile(r"^(down_)?revision(?:: [^=]+)? = (?:\"([^\"]*)\"|None)", re.M)


@cache
def known_revisions() -> frozenset[str]:
    """Every migration this pier has, read from the version files."""
    return frozenset(_revision_graph()[0])


def _revision_graph() -> tuple[set[str], set[str]]:
    revisions: set[str] = set()
    parents: set[str] = set()
    for file in (MIGRATIONS_DIR / "versions").glob("*.py"):
        for is_down, value in _REVISION.findall(file.read_text()):
            if value:
                (parents if is_down else revisions).add(value)
    return revisions, parents


@cache
def head_revision() -> str:
    """The newest migration, read from the version files. Alembic (and Mako, which
    it imports) costs a good part of a second to load, and every CLI call opens
    the store: loading it only when there is something to apply keeps `pier`
    quick to start."""
    revisions, parents = _revision_graph()
    heads = revisions - parents
    if len(heads) != 1:
        raise RuntimeError(f"pier's migrations must have one head, found {sorted(heads)}")
    return heads.pop()


def current_revisions(engine: Engine) -> list[str]:
    """The migrations the database is at ([] when it has none yet)."""
    with engine.connect() as connection:
        if not inspect(connection).has_table(VERSION_TABLE):
            return []
        return list(connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all())


def refuse_newer(engine: Engine, current: list[str]) -> None:
    """DatabaseTooNew when the database is at a migration this pier lacks."""
    unknown = [revision for revision in current if revision not in known_revisions()]
    if unknown:
        from importlib.metadata import version

        where = engine.url.render_as_string(hide_password=True)
        raise DatabaseTooNew(
            f"the database {where} is at migration {', '.join(unknown)}, which this pier ({version('pier')}, "
            f"latest migration {head_revision()}) does not have: a newer pier upgraded it. Run that pier "
            "(or a newer one) against it, or restore the backup taken before the upgrade "
            "(`pier db restore`, docs/operations.md)"
        )


def refuse_newer_url(url: str) -> None:
    """DatabaseTooNew when the database at `url` is newer than this pier (a
    start-up checks it before anything else opens the store)."""
    engine = create_store_engine(url)
    try:
        refuse_newer(engine, current_revisions(engine))
    finally:
        engine.dispose()


def _at_head(engine: Engine) -> bool:
    current = current_revisions(engine)
    refuse_newer(engine, current)
    return current == [head_revision()]


def upgrade_to_head(engine: Engine) -> None:
    """Apply every pending migration, in one transaction that other processes
    wait for (SQLite: the write lock; PostgreSQL: an advisory lock). Whoever
    comes second finds the schema at head and does nothing."""
    if _at_head(engine):
        return
    from alembic import command

    with engine.connect() as connection:
        connection.execution_options(**{SQLITE_BEGIN: "IMMEDIATE"})
        with connection.begin():
            if connection.dialect.name == "postgresql":
                key = advisory_key("pier.db.migrate")
                connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
            command.upgrade(alembic_config(connection), "head")


def scratch_schema(base_url: str, prefix: str = "pier_scratch") -> Iterator[str]:
    """For tests and benches: a URL whose store lives in a fresh PostgreSQL schema of
    base_url's database, dropped when the generator is closed or exhausted."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base_url)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = make_url(base_url).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
