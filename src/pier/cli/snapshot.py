"""`pier snapshot ...`: named, prebuilt sandbox images, and the agent layers
built on them (pier.cli.layers)."""

from __future__ import annotations

from typing import Annotated

import typer

from pier.cli.console import err, fail, out, refusals, show_list
from pier.errors import NotFoundError, PierError

snapshot_app = typer.Typer(
    help="Named, prebuilt sandbox images.", no_args_is_help=True, rich_markup_mode=None
)


@snapshot_app.command("list")
def snapshot_list(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Snapshots pier knows: built-in and from snapshots.yaml."""

    from pier.lifecycle.services import Services
    from pier.sandbox.snapshots import SnapshotCatalog

    services = Services()
    try:
        entries = SnapshotCatalog(services.settings).list(services.backend)
    except PierError as exc:
        raise fail(str(exc), code=1) from None
    rows = [[e.name, e.kind, "yes" if e.built else "no", e.description or ""] for e in entries]
    items = [
        {"name": e.name, "kind": e.kind, "built": e.built, "description": e.description} for e in entries
    ]
    show_list(("name", "kind", "built", "description"), rows, as_json, items)


@snapshot_app.command("layers")
def snapshot_layers() -> None:
    """Agent layers: images with a pinned agent CLI, built once, reused."""
    from pier.cli.layers import show_layers
    from pier.sandbox import get_backend
    from pier.settings import get_settings

    with refusals():
        show_layers(get_backend(get_settings()))


@snapshot_app.command("build")
def snapshot_build(name: Annotated[str, typer.Argument(help="snapshot name")]) -> None:
    """Build (or find cached) the snapshot's image."""
    from pier.lifecycle.services import Services
    from pier.sandbox.snapshots import SnapshotCatalog

    services = Services()
    try:
        snapshot = SnapshotCatalog(services.settings).get(name)
        if snapshot is None:
            raise NotFoundError(f"no snapshot named '{name}': see `pier snapshot list`")
        source = snapshot.source()
        ref = services.backend.ensure_image(
            source,
            lambda line: err.print(line, highlight=False, markup=False),
            services.settings.create_timeout_sec,
        )
    except PierError as exc:
        raise fail(str(exc), code=1) from None
    out.print(f"{name}: {ref}")


@snapshot_app.command("save")
def snapshot_save(
    run_id: Annotated[str, typer.Argument(help="the run whose sandbox was kept (pier run --keep)")],
    name: Annotated[str, typer.Argument(help="snapshot name: runbooks of the collection start from it")],
    collection: Annotated[str, typer.Option(help="the run's collection")] = "local",
) -> None:
    """Save a kept sandbox as a snapshot of its collection (`snapshot: NAME`)."""
    from pier.lifecycle.services import Services
    from pier.lifecycle.sessions import save_snapshot
    from pier.names import trajectory_id_of

    services = Services()
    with refusals():
        ref = save_snapshot(services.store, services.backend, collection, trajectory_id_of(run_id), name)
    out.print(
        f"saved snapshot {name} of collection {collection} ({ref}): use `snapshot: {name}`", highlight=False
    )
