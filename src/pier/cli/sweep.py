"""`pier sweep`: what crashed or abandoned runs left behind, removed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pier.cli.console import fail, out, refusals
from pier.cli.orphans import end_orphans
from pier.errors import PierError

if TYPE_CHECKING:
    from pier.lifecycle.start import Services


def sweep_command(
    images: Annotated[
        bool, typer.Option("--images", help="also remove agent layers no run used for --older-than")
    ] = False,
    older_than: Annotated[str, typer.Option(help="with --images: unused this long (30m, 12h, 7d)")] = "7d",
) -> None:
    """Delete sandboxes that crashed or abandoned runs left behind.

    With --images, also the agent layers no run used for --older-than."""
    from pier.lifecycle.wiring import Services
    from pier.sandbox.sweeper import sweep

    if images:
        from pier.cli.layers import parse_age

        with refusals():
            parse_age(older_than)  # bad input before anything is removed

    services = Services()
    end_orphans(services, remove_sandboxes=False)  # the sweep removes them: their runs have ended
    try:
        removed = sweep(services.backend, run_status_lookup(services))
    except PierError as exc:
        raise fail(str(exc), code=1) from None
    for item in removed:
        out.print(f"removed {item.id[:12]} (run {item.trajectory_id}): {item.reason}", highlight=False)
    out.print(f"{len(removed)} sandbox(es) removed")
    if images:
        from pier.cli.layers import prune_layers

        with refusals():
            prune_layers(services.backend, older_than)


def run_status_lookup(services: Services):
    from pier.lifecycle.sessions import sweep_status

    def status(trajectory_id: str) -> str | None:
        return sweep_status(services.store, trajectory_id)  # a kept sandbox's run: KEPT until it expires

    return status
