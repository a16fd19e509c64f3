"""`pier storage ...`: where outputs and uploads live, and moving them."""

from __future__ import annotations

from typing import Annotated

import typer

from pier.cli.console import err, out, refusals
from pier.errors import InputError, PierError

# boto3, rich, the settings and the storages load when a command runs: `pier
# --help` and every other command start without them.
storage_app = typer.Typer(
    help="Run outputs and uploads: local folder or S3.", no_args_is_help=True, rich_markup_mode=None
)


@storage_app.command("where")
def where_command() -> None:
    """The storage this machine's settings name (PIER_STORAGE_URL), once it answers."""
    from pier.settings import get_settings
    from pier.storage import open_storage

    url = get_settings().storage_location
    try:
        open_storage(url).check()
    except PierError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(2 if isinstance(exc, InputError) else 1) from None
    out.print(url, highlight=False)


@storage_app.command("migrate")
def migrate_command(
    to: Annotated[str, typer.Option("--to", help="the new storage: s3://BUCKET/PREFIX or file:///PATH")],
    source: Annotated[
        str | None, typer.Option("--from", help="the storage to copy; default the current one")
    ] = None,
) -> None:
    """Copy every stored output and upload to another storage, same keys; then
    set PIER_STORAGE_URL to it. Files already there at the same size are
    skipped, so running it again finishes an interrupted copy."""
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError
    from rich import filesize

    from pier.settings import get_settings
    from pier.storage import open_storage
    from pier.storage.migrate import migrate

    settings = get_settings()
    from_url = source or settings.storage_location
    if from_url.rstrip("/") == to.rstrip("/"):
        err.print("[red]error:[/red] --to names the storage being copied: give another one", highlight=False)
        raise typer.Exit(2)
    try:
        with refusals():
            done = migrate(open_storage(from_url), open_storage(to))
    except (BotoCoreError, ClientError, S3UploadFailedError) as exc:
        err.print(
            f"[red]error:[/red] could not copy to {to}: {exc}: check the bucket, AWS_ENDPOINT_URL and the "
            "credentials, then run the command again (what was copied is kept)",
            highlight=False,
        )
        raise typer.Exit(1) from None
    out.print(
        f"copied {done.copied} file(s) ({filesize.decimal(done.bytes)}), {done.skipped} already there: "
        f"{from_url} -> {to}\nnow set PIER_STORAGE_URL={to} (the source is left as it was)",
        highlight=False,
    )
