"""`pier snapshot ...`: named, prebuilt sandbox images, and the agent layers
built on them (pier.cli.layers)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from pier.cli.console import err, fail, out, refusals, show_list
from pier.errors import NotFoundError, PierError

if TYPE_CHECKING:
    from pier.lifecycle.wiring import Services
    from pier.sandbox.snapshots import SnapshotCatalog

snapshot_app = typer.Typer(
    help="Named, prebuilt sandbox images.", no_args_is_help=True, rich_markup_mode=None
)


@snapshot_app.command("list")
def snapshot_list(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Snapshots pier knows: built-in and from snapshots.yaml; for a built one,
    what its image has (versions read from it) and what it lacks of its promise."""

    from pier.lifecycle.wiring import Services
    from pier.sandbox.snapshots import SnapshotCatalog, facts_summary

    services = Services()
    try:
        entries = SnapshotCatalog(services.settings).list(services.backend)
    except PierError as exc:
        raise fail(str(exc), code=1) from None
    rows = [
        [
            e.name,
            e.kind,
            "yes" if e.built else "no",
            _has(e.facts, e.shortfalls, facts_summary) or e.description,
        ]
        for e in entries
    ]
    items = [
        {"name": e.name, "kind": e.kind, "built": e.built, "description": e.description,
         "has": {k: v for k, v in e.facts.items() if k != "built"}, "lacks": list(e.shortfalls)}
        for e in entries
    ]  # fmt: skip
    show_list(("name", "kind", "built", "has (read from the image) or description"), rows, as_json, items)


def _has(facts: dict[str, str], shortfalls: tuple[str, ...], summary: Callable[[dict[str, str]], str]) -> str:
    text = summary(facts)
    return f"{text}; LACKS: {'; '.join(shortfalls)}" if shortfalls else text


@snapshot_app.command("layers")
def snapshot_layers() -> None:
    """Agent layers: images with a pinned agent CLI, built once, reused."""
    from pier.cli.layers import show_layers
    from pier.sandbox import get_backend
    from pier.settings import get_settings

    with refusals():
        show_layers(get_backend(get_settings()))


@snapshot_app.command("build")
def snapshot_build(
    name: Annotated[str | None, typer.Argument(help="snapshot name")] = None,
    build_all: Annotated[
        bool, typer.Option("--all", help="every snapshot pier knows (ahead of runs)")
    ] = False,
) -> None:
    """Build (or find cached) the snapshot's image, layer by layer, then say what
    it has (versions read from the image) and what it lacks of its promise."""
    from pier.lifecycle.wiring import Services
    from pier.sandbox.snapshots import SnapshotCatalog

    if bool(name) == build_all:
        raise fail("give a snapshot's name, or --all for every one (see `pier snapshot list`)")
    services = Services()
    lacking = False
    try:
        catalog = SnapshotCatalog(services.settings)
        names = catalog.names() if build_all else [name or ""]
        for each in names:
            lacking |= _build_one(services, catalog, each)
    except PierError as exc:
        raise fail(str(exc), code=1) from None
    if lacking:
        err.print("warning: a snapshot lacks what it promises (above); runs on it say so too", markup=False)


def _build_one(services: Services, catalog: SnapshotCatalog, name: str) -> bool:
    """Build one snapshot; True when it lacks something it promises."""
    from pier.sandbox.snapshots import facts_summary, promise_shortfalls

    snapshot = catalog.get(name)
    if snapshot is None:
        raise NotFoundError(f"no snapshot named '{name}': see `pier snapshot list`")
    started = time.monotonic()
    ref = services.backend.ensure_image(
        snapshot.source(),
        lambda line: err.print(line, highlight=False, markup=False),
        services.settings.create_timeout_sec,
    )
    out.print(f"{name}: {ref} ({time.monotonic() - started:.0f} s)", highlight=False)
    facts = catalog.facts(services.backend, ref)
    if facts:
        out.print(f"{name} has: {facts_summary(facts)}", highlight=False, markup=False)
    shortfalls = promise_shortfalls(name, facts) if snapshot.origin == "built-in" else []
    for note in shortfalls:
        err.print(f"warning: {note}", highlight=False, markup=False)
    return bool(shortfalls)


@snapshot_app.command("save")
def snapshot_save(
    run_id: Annotated[str, typer.Argument(help="the run whose sandbox was kept (pier run --keep)")],
    name: Annotated[str, typer.Argument(help="snapshot name: runbooks of the collection start from it")],
    collection: Annotated[str, typer.Option(help="the run's collection")] = "local",
) -> None:
    """Save a kept sandbox as a snapshot of its collection (`snapshot: NAME`)."""
    from pier.lifecycle.sessions import save_snapshot
    from pier.lifecycle.wiring import Services
    from pier.names import trajectory_id_of

    services = Services()
    with refusals():
        ref = save_snapshot(services.store, services.backend, collection, trajectory_id_of(run_id), name)
    out.print(
        f"saved snapshot {name} of collection {collection} ({ref}): use `snapshot: {name}`", highlight=False
    )
