from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from pier.db import Store
from pier.db.engine import VERSION_TABLE, alembic_config
from pier.db.tables import metadata
from pier.errors import InputError
from pier.record import Trajectory

TABLES = {
    "runs",
    "run_events",
    "collections",
    "tokens",
    "tasks",
    "collection_env",
    "run_requests",
    "routines",
}


def _current_revision(store: Store) -> str | None:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


def test_open_creates_every_table_at_head(store: Store) -> None:
    assert set(inspect(store.engine).get_table_names()) >= TABLES
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert _current_revision(store) == head


def test_open_twice_is_idempotent_and_keeps_data(store_url: str) -> None:
    with Store.open(store_url) as first:
        first.create_run(Trajectory.new("t1", "c", "task"))
    with Store.open(store_url) as second:
        assert second.get_run("t1").trajectory_id == "t1"
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
        assert _current_revision(second) == head


def test_tables_match_migrations(store: Store) -> None:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"version_table": VERSION_TABLE, "compare_type": True}
        )
        assert compare_metadata(context, metadata) == []


def test_open_from_several_processes_at_once(store_url: str) -> None:
    code = "import sys; from pier.db import Store; Store.open(sys.argv[1]).close()"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, store_url], stderr=subprocess.PIPE) for _ in range(4)
    ]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    with Store.open(store_url) as store:
        assert set(inspect(store.engine).get_table_names()) >= TABLES


def test_sqlite_creates_parent_folder_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "pier.db"
    with Store.open(f"sqlite:///{path}") as store:
        assert path.is_file()
        with store.engine.connect() as connection:
            assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert connection.execute(text("PRAGMA busy_timeout")).scalar() >= 1000


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "mysql://u:p@h/db"])
def test_unsupported_urls_are_refused_with_a_hint(url: str) -> None:
    with pytest.raises(InputError, match="sqlite:///"):
        Store.open(url)


def test_repr_hides_the_password() -> None:
    from sqlalchemy import create_engine

    store = Store(create_engine("postgresql+psycopg://pier:secret@127.0.0.1/x"))
    assert "secret" not in repr(store)
    assert "postgresql+psycopg://pier:***@127.0.0.1/x" in repr(store), "it still says which database"
