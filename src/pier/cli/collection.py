"""`pier collection ...`: collections on the server's own store, from the shell."""

from __future__ import annotations

from typing import Annotated

import typer

from pier.cli.console import audited, err, fail, show_list
from pier.errors import InputError

collection_app = typer.Typer(
    help="Collections: namespaces of tasks, runs, secrets and tokens.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@collection_app.command("create")
def collection_create(name: Annotated[str, typer.Argument(help="the collection's name")]) -> None:
    """Create a collection (or reuse it) and print a new token for it, once."""
    from pier.api.tokens import issue_token
    from pier.lifecycle.services import Services
    from pier.names import check_collection_name

    try:
        check_collection_name(name)
    except InputError as exc:
        raise fail(str(exc)) from None
    store = Services().store
    with audited(store, "collection create", name, name):
        store.create_collection(name)
        token = issue_token(store, name, "cli")
    err.print(f"collection {name}: here is its token; it is shown only this once", highlight=False)
    print(token)


@collection_app.command("list")
def collection_list(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Every collection."""
    from pier.lifecycle.services import Services

    found = Services().store.list_collections()
    show_list(("collection",), [[c.name] for c in found], as_json, found)
