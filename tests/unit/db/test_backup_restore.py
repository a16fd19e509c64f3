"""docs/operations.md's backup and restore, run as written: a server with a
collection, a secret in its environment and a run with outputs is backed up
while it runs; its home (database, storage, secret.key) is wiped; the restore
brings the run, its outputs and the secret back. On SQLite and PostgreSQL
(pg_dump). And `pier db status|check|migrate`, and an older pier on a newer
database, said in one line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from tests.support.api_server import Server, make_collection, postgres_schema
from tests.support.services import executable

from pier.db import Store
from pier.db.engine import VERSION_TABLE, head_revision
from pier.settings import Settings
from pier.vault import load_vault

FAKE = "tests.support.fleet_backend:backend"
DOC = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
SECRET = "s3cr3t-value-kept-by-the-backup"


def documented(heading: str) -> str:
    """The bash block under `### heading` in docs/operations.md."""
    text_ = DOC.read_text()
    section = text_.split(f"### {heading}\n", 1)[1]
    found = re.search(r"```bash\n(.*?)```", section, re.S)
    assert found, heading
    return found.group(1)


def pier_env(home: Path, db_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIER_")}
    bindir = str(Path(sys.executable).parent)
    return {**env, "PATH": f"{bindir}:{env.get('PATH', '')}", "PIER_HOME": str(home), "PIER_DATABASE_URL": db_url,
            "PIER_RESIDENT": "0", **extra}  # fmt: skip


def shell(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'home' / 'pier.db'}"
        return
    executable("pg_dump", "pg_dump", "install PostgreSQL's client tools (Debian: postgresql-client)")
    schema = postgres_schema()
    yield next(schema)
    next(schema, None)


def test_backup_wipe_restore_brings_back_runs_outputs_and_secrets(tmp_path, db_url):
    home = tmp_path / "home"
    home.mkdir()
    backup = tmp_path / "backups" / "pier.tar.gz"
    server = Server(home=home, db_url=db_url, settings={"PIER_SANDBOX_BACKEND": FAKE}).start()
    try:
        collection = make_collection(server, "pier-fake:latest", prefix="backup")
        collection.put_task("t", "echo hi")
        with collection.client() as c:
            assert c.patch(f"/api/v1/collections/{collection.name}/environment",
                           json={"environment_variables": {"API_KEY": SECRET}}).status_code == 200  # fmt: skip
        tid = collection.run("t")
        assert collection.wait("t", tid, timeout=60)["status"] == "completed"
        with collection.client() as c:
            before = c.get(f"/api/v1/file/{collection.name}/t/{tid}/results/out.txt")
        assert before.status_code == 200
        env = pier_env(home, db_url, BACKUP=str(backup))
        done = shell(documented("Back up"), env, tmp_path)  # while the server runs
        assert done.returncode == 0, done.stderr
        assert backup.stat().st_mode & 0o077 == 0, "the backup holds the key: its owner's alone"
    finally:
        server.stop()

    shutil.rmtree(home)  # the disaster: database, storage, secret.key gone
    home.mkdir()
    if db_url.startswith("postgresql"):
        engine = create_engine(db_url)
        with engine.begin() as connection:
            for table in ("run_events", "runs", "collection_env", "tokens", "collections"):
                connection.execute(text(f"DELETE FROM {table}"))
        engine.dispose()

    done = shell(documented("Restore"), pier_env(home, db_url, BACKUP=str(backup)), tmp_path)
    assert done.returncode == 0, done.stderr
    assert (home / "secret.key").is_file()

    server.start(port=server.port)  # the collection's client talks to it
    try:
        record = collection.record("t", tid)
        assert record["status"] == "completed"
        with collection.client() as c:  # the token works again: the collection's rows came back
            after = c.get(f"/api/v1/file/{collection.name}/t/{tid}/results/out.txt")
        assert after.status_code == 200 and after.content == before.content
    finally:
        server.stop()
    settings = Settings(home=home, database_url=db_url)
    with Store.open(db_url) as store:
        sealed = store.get_env_encrypted(collection.name)
    assert load_vault(settings).decrypt(sealed["API_KEY"]) == SECRET


def test_restore_refuses_to_replace_what_is_there_without_force(tmp_path):
    home = tmp_path / "home"
    db_url = f"sqlite:///{home / 'pier.db'}"
    env = pier_env(home, db_url, PIER_SANDBOX_BACKEND=FAKE)
    with Store.open(db_url) as store:
        store.create_collection("kept")
    assert shell('pier db backup "$PWD/b.tar.gz"', env, tmp_path).returncode == 0
    refused = shell('pier db restore "$PWD/b.tar.gz"', env, tmp_path)
    assert (
        refused.returncode == 2
        and "holds runs or collections" in refused.stderr
        and "--force" in refused.stderr
    )
    assert shell('pier db restore --force "$PWD/b.tar.gz"', env, tmp_path).returncode == 0
    assert shell('pier db backup "$PWD/b.tar.gz"', env, tmp_path).returncode == 2, "never overwritten"


def test_status_check_and_migrate(tmp_path):
    home = tmp_path / "home"
    db_url = f"sqlite:///{home / 'pier.db'}"
    env = pier_env(home, db_url)
    fresh = shell("pier db status", env, tmp_path)
    assert fresh.returncode == 1 and "migration(s) to apply" in fresh.stdout
    checked = shell("pier db check", env, tmp_path)
    assert checked.returncode == 0 and "CREATE TABLE" in checked.stdout
    assert "rolled back" in checked.stdout
    assert shell("pier db status", env, tmp_path).returncode == 1, "check changed nothing"
    migrated = shell("pier db migrate", env, tmp_path)
    assert migrated.returncode == 0 and f"now at {head_revision()}" in migrated.stdout
    done = shell("pier db status", env, tmp_path)
    assert done.returncode == 0 and "up to date" in done.stdout


def test_an_older_pier_on_a_newer_database_says_so_in_one_line(tmp_path):
    home = tmp_path / "home"
    db_url = f"sqlite:///{home / 'pier.db'}"
    Store.open(db_url).close()
    engine = create_engine(db_url)
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = 'from_the_future'"))
    engine.dispose()
    env = pier_env(home, db_url)
    for command in ("pier runs", "pier serve --port 0", "pier db check"):
        done = shell(command, env, tmp_path)
        assert done.returncode != 0, command
        assert "Traceback" not in done.stderr, (command, done.stderr[-2000:])
        assert "from_the_future" in done.stderr and "newer pier" in done.stderr, (command, done.stderr)
    status = shell("pier db status", env, tmp_path)
    assert status.returncode == 1 and "newer than this pier" in status.stdout
