"""`pier audit`: who changed what, read from this machine's store (the same log
`GET /api/v1/audit` serves)."""

from __future__ import annotations

from typing import Annotated

import typer

from pier.cli.console import out


def audit_command(
    collection: Annotated[str | None, typer.Option(help="only this collection's entries")] = None,
    action: Annotated[
        str | None, typer.Option(help="actions containing this text, e.g. DELETE or tokens")
    ] = None,
    actor: Annotated[str | None, typer.Option(help="admin, token:<id>, anonymous, unknown-token")] = None,
    limit: Annotated[int, typer.Option(help="how many, newest first")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON entry per line")] = False,
) -> None:
    """The audit log: every change a token or a signed-in user made or was refused."""
    from pier.db import Store
    from pier.settings import get_settings

    store = Store.open(get_settings().db_url)
    try:
        entries = store.list_audit(collection=collection, action=action, actor=actor, limit=limit)
    finally:
        store.close()
    if as_json:
        for entry in entries:
            print(entry.model_dump_json())
        return
    from rich.table import Table

    table = Table("when (UTC)", "who", "collection", "action", "target", "status", "from")
    for e in entries:
        who = e.actor if e.token_name is None else f"{e.actor} ({e.token_name})"
        target = ", ".join(
            f"{k}={','.join(v) if isinstance(v, list) else v}"
            for k, v in e.target.items()
            if k != "collection"
        )
        table.add_row(e.at.strftime("%Y-%m-%d %H:%M:%S"), who, e.collection or "", e.action, target,
                      str(e.status), e.client or "")  # fmt: skip
    out.print(table)
    out.print(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}")
