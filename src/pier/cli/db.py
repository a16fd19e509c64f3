"""`pier db ...`: the database against this pier's migrations (status, check,
migrate) and backups (backup, restore): docs/operations.md has the procedures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pier.cli.console import refusals, say

db_app = typer.Typer(
    help="The database: migrations, backup and restore.", no_args_is_help=True, rich_markup_mode=None
)


def _places() -> tuple[str, Path | None, Path | None]:
    """The database URL, the local storage folder (None on S3) and the secret
    key file (None when PIER_SECRET_KEY holds the key), as the settings say."""
    from pier.settings import get_settings

    settings = get_settings()
    storage = settings.storage_root.expanduser() if settings.storage_location.startswith("file://") else None
    if storage is not None and settings.storage_url:
        from urllib.parse import unquote, urlparse

        storage = Path(unquote(urlparse(settings.storage_url).path))
    key = None if settings.secret_key is not None else settings.secret_key_file
    return settings.db_url, storage, key


@db_app.command("status")
def status_command(
    as_json: Annotated[bool, typer.Option("--json", help="as one JSON object")] = False,
) -> None:
    """The database's migration and this pier's latest; exit 1 when they differ."""
    import json
    from dataclasses import asdict

    from pier.db import admin

    with refusals():
        url, _, _ = _places()
        found = admin.status(url)
    if as_json:
        print(json.dumps(asdict(found)))
    else:
        print(f"database: {found.database}")
        print(f"current:  {', '.join(found.current) or '(none: an empty database)'}")
        print(f"latest:   {found.head} (this pier)")
        if found.state == "newer":
            print("state:    newer than this pier: a newer pier migrated it (`pier db check` says more)")
        elif found.pending:
            print(
                f"state:    {len(found.pending)} migration(s) to apply (`pier db check`, then `pier db migrate`):"
            )
            for step in found.pending:
                print(f"  {step.revision}: {step.summary}")
        else:
            print("state:    up to date")
    if found.state != "up to date":
        raise typer.Exit(1)


@db_app.command("check")
def check_command() -> None:
    """What `pier db migrate` would do, without doing it: the pending migrations
    run in a transaction that is rolled back, and the statements are printed."""
    from pier.db import admin

    with refusals():
        url, _, _ = _places()
        found, statements = admin.check(url)
    if not found.pending:
        print(f"up to date at {found.head}: nothing to migrate")
        return
    print(f"{len(found.pending)} migration(s) would be applied to {found.database}:")
    for step in found.pending:
        print(f"  {step.revision}: {step.summary}")
    print(f"{len(statements)} statement(s), rolled back:")
    for statement in statements:
        print(f"  {statement};")


@db_app.command("migrate")
def migrate_command() -> None:
    """Apply the pending migrations (what `pier serve` does when it starts)."""
    from pier.db import admin

    with refusals():
        url, _, _ = _places()
        before, after = admin.migrate(url)
    if not before.pending:
        print(f"up to date at {after.head}: nothing to migrate")
        return
    for step in before.pending:
        print(f"applied {step.revision}: {step.summary}")
    print(f"now at {', '.join(after.current)}")


@db_app.command("backup")
def backup_command(
    archive: Annotated[Path, typer.Argument(help="the backup file to write (.tar.gz); never overwritten")],
) -> None:
    """Back up the database, the local run storage and secret.key into one
    archive, consistently while the server runs. Keep it private: with the key,
    it opens every collection's secrets."""
    from pier.db import admin

    with refusals():
        url, storage, key = _places()
        manifest = admin.backup(url, archive, storage, key)
    say(f"backed up to {archive}: the {manifest.database} database at {', '.join(manifest.revision)}, "
        f"{manifest.files} stored file(s), secret.key {'included' if manifest.secret_key else 'NOT included'}")  # fmt: skip
    for note in manifest.notes:
        say(f"note: {note}")


@db_app.command("restore")
def restore_command(
    archive: Annotated[Path, typer.Argument(help="a file `pier db backup` wrote")],
    force: Annotated[
        bool, typer.Option("--force", help="replace a database, storage or key that exist")
    ] = False,
) -> None:
    """Put a backup back (stop the server first); the next start migrates it if
    this pier is newer."""
    from pier.db import admin

    with refusals():
        url, storage, key = _places()
        manifest = admin.restore(url, archive, storage, key, force=force)
    say(f"restored {archive} (pier {manifest.pier_version}, {manifest.created}): the database, "
        f"{manifest.files} stored file(s){', secret.key' if manifest.secret_key else ''}")  # fmt: skip
    for note in manifest.notes:
        say(f"note: {note}")
    _set_audit_head_aside()


def _set_audit_head_aside() -> None:
    """The audit head this machine recorded names an entry of the database
    before the restore, which the restored one may not have: it is kept aside
    (renamed), and the next audit entry starts a new one."""
    import time

    from pier.db.audit import HEAD_FILE
    from pier.settings import get_settings

    head = get_settings().home / HEAD_FILE
    if not head.is_file():
        return
    aside = head.with_name(f"{HEAD_FILE}.before-restore-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    head.replace(aside)
    say(f"note: the audit head recorded before the restore is now {aside}: `pier audit verify` checks the "
        "restored chain's newest entries from its next entry on")  # fmt: skip
