"""`pier volume list|rm`: a collection's named volumes (a runbook's `volumes:`)."""

from __future__ import annotations

from typing import Annotated

import typer

volume_app = typer.Typer(
    help="A collection's named volumes (a runbook's `volumes:`).", no_args_is_help=True, rich_markup_mode=None
)


@volume_app.command("list")
def list_command(
    collection: Annotated[str, typer.Option(help="the collection whose volumes to list")] = "local",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """The collection's volumes: name, the engine's name, created, sandboxes using it (and where)."""
    import json

    from pier.cli.console import out, refusals
    from pier.lifecycle.volumes import list_volumes
    from pier.lifecycle.wiring import Services

    services = Services()
    with refusals():
        found = list_volumes(services.backend, collection)
    if as_json:
        rows = [{"name": v.name, "engine_name": v.engine_name, "created": v.created, "in_use": v.in_use,
                 "paths": list(v.paths)} for v in found]  # fmt: skip
        print(json.dumps({"collection": collection, "volumes": rows}, indent=2))
        return
    if not found:
        out.print(f"no volumes in collection {collection}", highlight=False)
        return
    for v in found:
        at = f" at {', '.join(v.paths)}" if v.paths else ""
        used = "" if not v.in_use else f"  (in use by {v.in_use} sandbox(es){at})"
        out.print(f"{v.name}  {v.engine_name}  {v.created or ''}{used}", highlight=False)


@volume_app.command("rm")
def rm_command(
    name: Annotated[
        str, typer.Argument(help="the volume's name in the collection (as the runbook names it)")
    ],
    collection: Annotated[str, typer.Option(help="the volume's collection")] = "local",
) -> None:
    """Remove a volume of the collection and its data (refused while a sandbox mounts it)."""
    from pier.cli.console import out, refusals
    from pier.lifecycle.volumes import remove_volume
    from pier.lifecycle.wiring import Services

    services = Services()
    with refusals():
        removed = remove_volume(services.backend, collection, name)
    out.print(
        f"volume {removed.name} ({removed.engine_name}) of collection {collection} removed", highlight=False
    )
