"""`pier audit`: who changed what, read from this machine's store (the same log
`GET /api/v1/audit` serves); `pier audit verify` checks its hash chain,
`pier audit export` writes it as JSON lines (to stdout, a file or syslog),
following new entries as they are written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pier.cli.console import fail, out, say

audit_app = typer.Typer(
    help="The audit log: every change a token, a signed-in user or a command made or was refused.",
    invoke_without_command=True,
    rich_markup_mode=None,
)


@audit_app.callback()
def audit_command(
    ctx: typer.Context,
    collection: Annotated[str | None, typer.Option(help="only this collection's entries")] = None,
    action: Annotated[
        str | None, typer.Option(help="actions containing this text, e.g. DELETE or tokens")
    ] = None,
    actor: Annotated[str | None, typer.Option(help="admin, token:<id>, anonymous, unknown-token")] = None,
    limit: Annotated[int, typer.Option(help="how many, newest first")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON entry per line")] = False,
) -> None:
    """The audit log: every change a token or a signed-in user made or was refused."""
    if ctx.invoked_subcommand is not None:
        return
    from pier.db import Store
    from pier.settings import get_settings

    store = Store.open(get_settings().db_url)
    try:
        entries = store.list_audit(collection=collection, action=action, actor=actor, limit=limit)
    finally:
        store.close()
    if as_json:
        for entry in entries:
            print(entry.model_dump_json(exclude={"prev_hash", "entry_hash"}))
        return
    from rich.table import Table

    table = Table("when (UTC)", "who", "collection", "action", "object", "outcome", "from")
    for e in entries:
        who = e.actor if e.token_name is None else f"{e.actor} ({e.token_name})"
        outcome = f"{e.outcome or ''} {e.status}".strip()
        table.add_row(e.at.strftime("%Y-%m-%d %H:%M:%S"), who, e.collection or "", e.action, e.object_id or "",
                      outcome, e.client or "")  # fmt: skip
    out.print(table)
    out.print(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}")


@audit_app.command("verify")
def verify_command(
    against: Annotated[
        Path | None,
        typer.Option(
            help="an export (`pier audit export` JSON lines) kept elsewhere: every entry still there"
        ),
    ] = None,
) -> None:
    """Check the hash chain: a changed or deleted entry is named, the newest
    included (the chain must reach the head recorded in PIER_HOME/audit.head,
    and hold every entry of --against); exit 1 then."""
    from pier.db import Store
    from pier.db.audit import HEAD_FILE
    from pier.settings import get_settings

    settings = get_settings()
    exported = _exported(against) if against is not None else None
    with Store.open(settings.db_url) as store:
        store.anchor_audit(settings.home / HEAD_FILE)
        report = store.verify_audit(exported=exported)
    for note in report.notes:
        print(f"note: {note}")
    legacy = f" ({report.legacy} older entries from before the chain, not checked)" if report.legacy else ""
    if report.intact:
        print(f"audit log intact: {report.entries} chained entries{legacy}")
        return
    for problem in report.problems:
        print(f"TAMPERED: {problem}")
    print(
        f"audit log NOT intact: {len(report.problems)} problem(s) in {report.entries} chained entries{legacy}"
    )
    raise typer.Exit(1)


def _exported(path: Path) -> dict[int, str]:
    """id: entry hash of each line of an export (a line that is not one is an error)."""
    import json

    found: dict[int, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise fail(f"--against {path}: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if entry["entry_hash"]:  # an entry from before the chain has none
                found[int(entry["id"])] = str(entry["entry_hash"])
        except (ValueError, KeyError, TypeError):
            raise fail(f"--against {path}: line {number} is not an entry `pier audit export` wrote") from None
    return found


@audit_app.command("export")
def export_command(
    output: Annotated[Path | None, typer.Option(help="append to this file (default stdout)")] = None,
    syslog: Annotated[
        str | None, typer.Option(help="send each entry to syslog: /dev/log, or HOST:PORT (UDP)")
    ] = None,
    after: Annotated[int, typer.Option(help="start after this entry id (0: from the first)")] = 0,
    follow: Annotated[
        bool, typer.Option("--follow", help="keep going: write new entries as they come")
    ] = False,
    poll: Annotated[float, typer.Option(help="with --follow: seconds between looks")] = 1.0,
) -> None:
    """The audit log as JSON lines, oldest first, with each entry's id and
    chain hashes; every source's entries (API, web UI, commands, any replica)."""
    import sys
    import time

    from pier.db import Store
    from pier.settings import get_settings

    sink = open(output, "a", encoding="utf-8") if output else sys.stdout  # noqa: SIM115 - closed below
    send = _syslog(syslog) if syslog else None
    written = 0
    try:
        with Store.open(get_settings().db_url) as store:
            while True:
                batch = store.audit_after(after, 1000)
                for entry in batch:
                    line = entry.model_dump_json()
                    if send is not None:
                        send(line)
                    if send is None or output is not None:
                        sink.write(line + "\n")
                    after = entry.id or after
                    written += 1
                sink.flush()
                if len(batch) == 1000:
                    continue
                if not follow:
                    break
                time.sleep(poll)
    except KeyboardInterrupt:
        pass
    finally:
        if output:
            sink.close()
    if output or send is not None:
        say(f"exported {written} entr{'y' if written == 1 else 'ies'}; the last id is {after}")


def _syslog(address: str):
    import logging
    import logging.handlers

    target: str | tuple[str, int] = address
    if not address.startswith("/"):
        host, _, port = address.rpartition(":")
        target = (host or "127.0.0.1", int(port or 514))
    handler = logging.handlers.SysLogHandler(address=target, facility=logging.handlers.SysLogHandler.LOG_AUTH)
    handler.setFormatter(logging.Formatter("pier-audit: %(message)s"))
    logger = logging.getLogger("pier.audit.export")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return logger.info
