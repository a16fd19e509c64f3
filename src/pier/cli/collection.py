"""`pier collection ...`: collections on the server's own store, from the shell."""

from __future__ import annotations

from typing import Annotated

import typer

from pier.cli.console import audited, err, fail, refusals, show_list
from pier.errors import InputError

collection_app = typer.Typer(
    help="Collections: namespaces of tasks, runs, secrets and tokens.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@collection_app.command("create")
def collection_create(name: Annotated[str, typer.Argument(help="the collection's name")]) -> None:
    """Create a collection (or reuse it) and print a new token for it, once."""
    from pier.lifecycle.wiring import Services
    from pier.names import check_collection_name
    from pier.server.tokens import issue_token

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
    from pier.lifecycle.wiring import Services

    found = Services().store.list_collections()
    show_list(("collection",), [[c.name] for c in found], as_json, found)


env_app = typer.Typer(
    help="A collection's environment: the secrets and settings its runs may receive. Values are "
    "write-only: they are never printed.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
collection_app.add_typer(env_app, name="env")

Collection = Annotated[str, typer.Argument(help="the collection's name")]


def _change(collection: str, changes: dict[str, str | None]) -> list[str]:
    """The environment's names after the change, made as the API makes it (one
    check of every name and value, then encrypted at rest)."""
    from pier.lifecycle.wiring import Services
    from pier.server.errors import Invalid, ServiceError, field_errors
    from pier.server.services.collections import apply_environment
    from pier.vault import load_vault

    services = Services()
    action = "collection env set" if any(v is not None for v in changes.values()) else "collection env unset"
    with audited(services.store, action, collection, collection) as note:
        note.detail = {"set": sorted(k for k, v in changes.items() if v is not None),
                       "removed": sorted(k for k, v in changes.items() if v is None)}  # fmt: skip
        services.store.get_collection(collection)
        try:
            return apply_environment(services.store, load_vault(services.settings), collection, changes)
        except Invalid as exc:  # a name or value the API refuses with a 422
            raise InputError(
                "; ".join(f"{e['field']}: {e['message']}" for e in field_errors(exc.errors()))
            ) from None
        except ServiceError as exc:
            raise InputError(exc.detail) from None


@env_app.command("set")
def env_set(
    collection: Collection,
    variables: Annotated[
        list[str],
        typer.Argument(
            metavar="NAME[=VALUE]...",
            help="NAME alone takes its value from your environment (so it is never on the command line); "
            "NAME=VALUE sets VALUE",
        ),
    ],
) -> None:
    """Set variables of a collection's environment (kept encrypted; runs that
    declare them, and agents that read them, receive them)."""
    import os

    changes: dict[str, str | None] = {}
    for item in variables:
        name, has_value, value = item.partition("=")
        if not has_value:
            if name not in os.environ:
                raise fail(f"{name} is not set in your environment: export it first, or give {name}=VALUE")
            value = os.environ[name]
        changes[name] = value
    with refusals():
        names = _change(collection, changes)
    err.print(f"collection {collection}: set {', '.join(sorted(changes))} ({len(names)} variable(s) in all)",
              highlight=False)  # fmt: skip


@env_app.command("unset")
def env_unset(
    collection: Collection,
    names: Annotated[list[str], typer.Argument(metavar="NAME...", help="the variables to remove")],
) -> None:
    """Remove variables from a collection's environment."""
    with refusals():
        known = set(_names(collection))
        absent = sorted(set(names) - known)
        if absent:
            raise InputError(f"collection {collection} has no {', '.join(absent)}: `pier collection env list "
                             f"{collection}` shows what it has")  # fmt: skip
        _change(collection, dict.fromkeys(names))
    err.print(f"collection {collection}: removed {', '.join(sorted(set(names)))}", highlight=False)


def _names(collection: str) -> list[str]:
    from pier.lifecycle.wiring import Services

    store = Services().store
    store.get_collection(collection)
    return store.list_env_names(collection)


@env_app.command("list")
def env_list(
    collection: Collection,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """The names of a collection's variables (values are never shown)."""
    with refusals():
        names = _names(collection)
    show_list(("variable",), [[n] for n in names], as_json, [{"name": n} for n in names],
              empty=f"collection {collection} has no environment variables")  # fmt: skip
