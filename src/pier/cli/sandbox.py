"""`pier sandbox check`: the conformance suite on the configured sandbox backend."""

from __future__ import annotations

from typing import Annotated

import typer

sandbox_app = typer.Typer(
    help="Sandbox backends, and kept sandboxes.", no_args_is_help=True, rich_markup_mode=None
)
_STYLE = {"passed": "green", "failed": "red"}


@sandbox_app.command("check")
def check_command(
    image: Annotated[
        str | None, typer.Option(help="image to run the checks on; default PIER_BASE_IMAGE")
    ] = None,
    only: Annotated[list[str], typer.Option("--only", help="run only this check (repeatable)")] = [],  # noqa: B006
) -> None:
    """Run the sandbox conformance suite on PIER_SANDBOX_BACKEND; exit 1 when a check fails."""
    from rich.console import Console
    from rich.markup import escape

    from pier.errors import PierError
    from pier.sandbox import get_backend
    from pier.sandbox.base import SandboxSource
    from pier.sandbox.conformance import CHECKS, run_check
    from pier.settings import get_settings

    out, err = Console(), Console(stderr=True)
    unknown = sorted(set(only) - set(CHECKS))
    if unknown:
        err.print(f"[red]error:[/red] no check named {', '.join(unknown)}: choose from {', '.join(CHECKS)}")
        raise typer.Exit(2)
    settings = get_settings()
    try:
        backend = get_backend(settings)
        backend.ping()
        ref = image or settings.base_image
        ref = backend.ensure_image(SandboxSource(kind="image", name=ref, image=ref), lambda _: None, 600)
    except PierError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    out.print(f"backend {backend.name}, image {ref}, declares: {', '.join(backend.capabilities.declared())}")
    failed = 0
    for name in only or CHECKS:
        result = run_check(name, backend, ref)
        failed += result.status == "failed"
        detail = f"  {escape(result.detail)}" if result.detail else ""
        out.print(f"[{_STYLE[result.status]}]{result.status:7}[/] {name}{detail}")
    out.print(f"{failed} check(s) failed" if failed else "every check passed")
    raise typer.Exit(1 if failed else 0)


def _pause_or_resume(run_id: str, collection: str, pause: bool) -> None:
    from pier.cli.console import out, refusals
    from pier.lifecycle.sessions import pause_kept
    from pier.lifecycle.wiring import Services
    from pier.names import trajectory_id_of

    services = Services()
    with refusals():
        sandbox_id = pause_kept(services.store, services.backend, collection, trajectory_id_of(run_id), pause)
    how = "paused: its processes are frozen, its CPU free" if pause else "resumed"
    out.print(f"sandbox {sandbox_id[:12]} of run {trajectory_id_of(run_id)} {how}", highlight=False)


@sandbox_app.command("pause")
def pause_command(
    run_id: Annotated[str, typer.Argument(help="the run whose sandbox was kept (pier run --keep)")],
    collection: Annotated[str, typer.Option(help="the run's collection")] = "local",
) -> None:
    """Freeze a kept sandbox's processes (docker pause); --continue-from resumes it."""
    _pause_or_resume(run_id, collection, pause=True)


@sandbox_app.command("resume")
def resume_command(
    run_id: Annotated[str, typer.Argument(help="the run whose kept sandbox was paused")],
    collection: Annotated[str, typer.Option(help="the run's collection")] = "local",
) -> None:
    """Thaw a paused kept sandbox."""
    _pause_or_resume(run_id, collection, pause=False)
