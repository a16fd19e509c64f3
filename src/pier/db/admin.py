"""`pier db`: where the database stands against this pier's migrations, what
an upgrade would do (run in a transaction that is rolled back), the upgrade
itself, and backups: the database (SQLite's online backup, `pg_dump` on
PostgreSQL), the local run storage and the key that encrypts collections'
environments, in one archive, consistent while the server runs (the database
is copied first, then the files: every output the copy names is in it)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from sqlalchemy import Engine, event, inspect, text
from sqlalchemy.engine import make_url

from pier.db.engine import (
    SQLITE_BEGIN,
    advisory_key,
    alembic_config,
    conninfo,
    create_store_engine,
    current_revisions,
    head_revision,
    refuse_newer,
    upgrade_to_head,
)
from pier.errors import InputError, PierError

MANIFEST = "manifest.json"
DATABASE_SQLITE = "database.sqlite"
DATABASE_PG = "database.pgdump"
STORAGE = "storage"
SECRET_KEY = "secret.key"


@dataclass(frozen=True)
class Migration:
    revision: str
    summary: str


@dataclass(frozen=True)
class Status:
    database: str  # the URL, password hidden
    current: list[str]
    head: str
    pending: list[Migration]
    state: str  # "up to date", "behind", "empty", "newer"


def _masked(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def _script():
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def _pending(current: list[str]) -> list[Migration]:
    script = _script()
    base = current[0] if current else "base"
    steps = list(script.iterate_revisions("head", base))
    return [Migration(s.revision, _summary(s.doc)) for s in reversed(steps) if s.revision not in current]


def _summary(doc: str | None) -> str:
    """A migration's first paragraph, on one line."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def status(url: str) -> Status:
    engine = create_store_engine(url)
    try:
        current = current_revisions(engine)
        try:
            refuse_newer(engine, current)
        except PierError:
            return Status(_masked(url), current, head_revision(), [], "newer")
        pending = _pending(current)
    finally:
        engine.dispose()
    state = "empty" if not current else ("up to date" if not pending else "behind")
    return Status(_masked(url), current, head_revision(), pending, state)


def check(url: str) -> tuple[Status, list[str]]:
    """What `migrate` would do: every pending migration is applied in one
    transaction that is then rolled back; the statements it sent."""
    before = status(url)
    if before.state == "newer":
        engine = create_store_engine(url)
        try:
            refuse_newer(engine, before.current)
        finally:
            engine.dispose()
    if not before.pending:
        return before, []
    from alembic import command

    engine = create_store_engine(url)
    statements: list[str] = []

    def seen(_conn, _cursor, statement, _params, _context, _many) -> None:
        statements.append(" ".join(statement.split()))

    try:
        with engine.connect() as connection:
            connection.execution_options(**{SQLITE_BEGIN: "IMMEDIATE"})
            transaction = connection.begin()
            try:
                if connection.dialect.name == "postgresql":
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(:k)"), {"k": advisory_key("pier.db.migrate")}
                    )
                event.listen(connection, "before_cursor_execute", seen)
                command.upgrade(alembic_config(connection), "head")
            finally:
                event.remove(connection, "before_cursor_execute", seen)
                transaction.rollback()
    finally:
        engine.dispose()
    changes = [s for s in statements if not s.upper().startswith(("SELECT", "PRAGMA"))]
    return before, changes


def migrate(url: str) -> tuple[Status, Status]:
    """Apply what is pending; the status before and after."""
    before = status(url)
    engine = create_store_engine(url)
    try:
        upgrade_to_head(engine)
    finally:
        engine.dispose()
    return before, status(url)


# backups


@dataclass
class Manifest:
    pier_version: str
    created: str
    database: str  # sqlite or postgresql
    revision: list[str]
    storage: str  # "included", or why not
    secret_key: bool
    files: int = 0
    notes: list[str] = field(default_factory=list)


def backup(url: str, dest: Path, storage_dir: Path | None, secret_key_file: Path | None) -> Manifest:
    """Write a backup archive (tar.gz, 0600) to `dest`: the database, the local
    storage folder (None: storage is elsewhere, e.g. S3, and backed up there),
    the secret key file (None: the key comes from PIER_SECRET_KEY)."""
    dest = dest.expanduser()
    if dest.exists():
        raise InputError(f"{dest} exists: give a new file name (backups are never overwritten)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    engine = create_store_engine(url)
    try:
        revision = current_revisions(engine)
    finally:
        engine.dispose()
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pier-backup-", dir=dest.parent) as work:
        folder = Path(work)
        if backend == "sqlite":
            _sqlite_backup(Path(parsed.database or ""), folder / DATABASE_SQLITE)
            database_file = DATABASE_SQLITE
        else:
            _pg_dump(url, folder / DATABASE_PG)
            database_file = DATABASE_PG
        storage_note = "included"
        if storage_dir is None:
            storage_note = (
                "not included: the run storage is not a local folder (PIER_STORAGE_URL); back it up there"
            )
            notes.append(storage_note)
        key = secret_key_file is not None and secret_key_file.is_file()
        if secret_key_file is None:
            notes.append("secret.key not included: the key is PIER_SECRET_KEY; keep it with this backup")
        elif not key:
            notes.append(f"no {secret_key_file} yet: no collection environment has been set, nothing to keep")
        manifest = Manifest(version("pier"), datetime.now(UTC).isoformat(timespec="seconds"), backend,
                            revision, storage_note, key, notes=notes)  # fmt: skip
        partial = dest.with_name(f".{dest.name}.partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
                tar.add(folder / database_file, arcname=database_file)
                if key:
                    assert secret_key_file is not None
                    tar.add(secret_key_file, arcname=SECRET_KEY)
                if storage_dir is not None and storage_dir.is_dir():
                    for path in sorted(storage_dir.rglob("*")):
                        if path.is_file() and not path.is_symlink():
                            tar.add(
                                path, arcname=f"{STORAGE}/{path.relative_to(storage_dir)}", recursive=False
                            )
                            manifest.files += 1
                data = json.dumps(asdict(manifest), indent=2).encode()
                info = tarfile.TarInfo(MANIFEST)
                info.size, info.mode, info.mtime = len(data), 0o600, int(datetime.now(UTC).timestamp())
                import io

                tar.addfile(info, io.BytesIO(data))
            os.replace(partial, dest)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    return manifest


def _sqlite_backup(source: Path, target: Path) -> None:
    """SQLite's online backup: a consistent copy while other processes write."""
    if not source.is_file():
        raise InputError(f"no database at {source}: check PIER_HOME or PIER_DATABASE_URL")
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _schema_of(url: str) -> str | None:
    options = make_url(url).query.get("options", "")
    options = options if isinstance(options, str) else " ".join(options)
    for part in options.replace("-c ", "-c").split():
        if part.startswith("-csearch_path="):
            return part.split("=", 1)[1].split(",")[0]
    return None


def _pg_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise PierError(
            f"`{name}` is not on PATH: install PostgreSQL's client tools (Debian: postgresql-client)"
        )
    return path


def _without_options(url: str) -> str:
    """libpq conninfo without the search_path option (pg_dump sets its own)."""
    parsed = make_url(url)
    return conninfo(parsed.difference_update_query(["options"]).render_as_string(hide_password=False))


def _pg_dump(url: str, target: Path) -> None:
    args = [_pg_tool("pg_dump"), "--format=custom", "--no-owner", f"--file={target}"]
    schema = _schema_of(url)
    if schema:
        args.append(f"--schema={schema}")
    done = subprocess.run([*args, f"--dbname={_without_options(url)}"], capture_output=True, text=True)
    if done.returncode != 0:
        raise PierError(f"pg_dump failed: {done.stderr.strip()[-500:]}")


def _pg_restore(url: str, dump: Path) -> None:
    args = [_pg_tool("pg_restore"), "--clean", "--if-exists", "--no-owner", "--single-transaction"]
    done = subprocess.run(
        [*args, f"--dbname={_without_options(url)}", str(dump)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise PierError(f"pg_restore failed: {done.stderr.strip()[-500:]}")


def _has_data(engine: Engine) -> bool:
    with engine.connect() as connection:
        tables = set(inspect(connection).get_table_names())
        for table in ("trajectories", "runs", "collections"):
            if table in tables and connection.execute(text(f"SELECT 1 FROM {table} LIMIT 1")).first():
                return True
    return False


def read_manifest(archive: Path) -> Manifest:
    with tarfile.open(archive, "r:gz") as tar:
        member = tar.extractfile(MANIFEST)
        if member is None:
            raise InputError(f"{archive} is no pier backup (no {MANIFEST})")
        return Manifest(**json.loads(member.read()))


def restore(
    url: str, archive: Path, storage_dir: Path | None, secret_key_file: Path | None, force: bool = False
) -> Manifest:
    """Put a backup back: the database, the local storage, the secret key.
    Refuses to replace a database, storage or key that holds something unless
    `force`; the server must be stopped (SQLite's file is replaced)."""
    archive = archive.expanduser()
    if not archive.is_file():
        raise InputError(f"no backup at {archive}")
    try:
        manifest = read_manifest(archive)
    except (tarfile.TarError, OSError, KeyError) as exc:
        raise InputError(f"{archive} is no pier backup ({exc})") from None
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend != manifest.database:
        raise InputError(
            f"the backup holds a {manifest.database} database and PIER_DATABASE_URL is {backend}: "
            "restore into the same kind of database"
        )
    engine = create_store_engine(url)
    try:
        occupied = _has_data(engine)
    finally:
        engine.dispose()
    problems = []
    if occupied:
        problems.append(f"the database {_masked(url)} holds runs or collections")
    if storage_dir is not None and storage_dir.is_dir() and any(storage_dir.iterdir()):
        problems.append(f"the storage folder {storage_dir} is not empty")
    if secret_key_file is not None and secret_key_file.is_file() and manifest.secret_key:
        problems.append(f"{secret_key_file} exists")
    if problems and not force:
        raise InputError("; ".join(problems) + ": restore replaces them; pass --force to do so")
    with tempfile.TemporaryDirectory(prefix="pier-restore-") as work, tarfile.open(archive, "r:gz") as tar:
        folder = Path(work)
        tar.extractall(folder, filter="data")
        if backend == "sqlite":
            target = Path(parsed.database or "")
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            for suffix in ("-wal", "-shm"):
                Path(f"{target}{suffix}").unlink(missing_ok=True)
            shutil.copyfile(folder / DATABASE_SQLITE, target)
            os.chmod(target, 0o600)
        else:
            _pg_restore(url, folder / DATABASE_PG)
        if storage_dir is not None and (folder / STORAGE).is_dir():
            if storage_dir.exists():
                shutil.rmtree(storage_dir)
            storage_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copytree(folder / STORAGE, storage_dir)
        if secret_key_file is not None and (folder / SECRET_KEY).is_file():
            secret_key_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copyfile(folder / SECRET_KEY, secret_key_file)
            os.chmod(secret_key_file, 0o600)
    return manifest
