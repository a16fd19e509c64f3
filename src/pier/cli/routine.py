"""`pier routine ...`: routines (scheduled runs) managed from the shell on the
server's own store, checked as the API checks them. A running `pier serve` on
that store fires them."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pier.cli.console import audited, out, refusals, show_list
from pier.cli.options import parse_vars
from pier.errors import InputError

if TYPE_CHECKING:
    from pier.db import StoredRoutine
    from pier.routines import Routines

routine_app = typer.Typer(
    help="Routines: a task run on a cron schedule by `pier serve`.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

Collection = Annotated[str, typer.Argument(help="the task's collection")]
TaskName = Annotated[str, typer.Argument(help="the task the routine runs")]
Name = Annotated[str, typer.Argument(help="the routine's name (unique per task)")]


def _routines() -> Routines:
    from pier.lifecycle.wiring import Services
    from pier.routines import Routines

    return Routines(Services().store)


def _label(r: StoredRoutine) -> str:
    return f"{r.collection}/{r.task}/{r.name}"


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "-"


def _init_params(init_params: str | None, var: list[str]) -> dict[str, Any]:
    import json

    params: dict[str, Any] = {}
    if init_params:
        try:
            params = json.loads(init_params)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"--init-params is not JSON ({exc.msg}): give an object such as '{{\"vars\": {{}}}}'"
            ) from None
        if not isinstance(params, dict):
            raise InputError("--init-params must be a JSON object")
    if var:
        params["vars"] = {**(params.get("vars") or {}), **parse_vars(var)}
    return params


@routine_app.command("create")
def routine_create(
    collection: Collection,
    task: TaskName,
    name: Name,
    cron: Annotated[str, typer.Option(help="five fields, e.g. '0 9 * * 1-5', or @daily, @hourly, ...")],
    timezone: Annotated[str, typer.Option(help="IANA time zone the cron is read in")] = "UTC",
    var: Annotated[list[str], typer.Option("--var", help="NAME=VALUE for every run")] = [],  # noqa: B006
    init_params: Annotated[str | None, typer.Option(help="the runs' init_params as a JSON object")] = None,
    description: Annotated[str | None, typer.Option(help="what it is for")] = None,
    paused: Annotated[bool, typer.Option(help="create it paused")] = False,
) -> None:
    """Create a routine of a stored task."""
    with refusals():
        params = _init_params(init_params, var)
        routines = _routines()
        with audited(routines.store, "routine create", collection, f"{task}/{name}"):
            routine = routines.create(
                collection, task, name, cron, timezone, params, enabled=not paused, description=description
            )
    out.print(f"routine {_label(routine)} created (id {routine.id}); next run {_when(routine.next_run_at)}",
              highlight=False)  # fmt: skip


@routine_app.command("list")
def routine_list(
    collection: Annotated[str | None, typer.Option(help="only this collection")] = None,
    task: Annotated[str | None, typer.Option(help="only this task")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Routines with their schedule, state and next run."""

    from pier.lifecycle.wiring import Services

    found = Services().store.list_routines(collection, task)
    rows = [
        [str(r.id), _label(r), f"{r.cron_expression} ({r.timezone})",
         "active" if r.enabled else "paused", _when(r.next_run_at), _when(r.last_run_at)]
        for r in found
    ]  # fmt: skip
    columns = ("id", "routine", "schedule", "status", "next run", "last run")
    show_list(columns, rows, as_json, found, empty="no routines")


@routine_app.command("pause")
def routine_pause(collection: Collection, task: TaskName, name: Name) -> None:
    """Stop firing it until it is resumed."""
    with refusals():
        routines = _routines()
        with audited(routines.store, "routine pause", collection, f"{task}/{name}"):
            routines.pause(routines.get(collection, task, name))
    out.print(f"routine {collection}/{task}/{name} paused", highlight=False)


@routine_app.command("resume")
def routine_resume(collection: Collection, task: TaskName, name: Name) -> None:
    """Fire it again from its next tick (missed ticks are not made up)."""
    with refusals():
        routines = _routines()
        with audited(routines.store, "routine resume", collection, f"{task}/{name}"):
            routine = routines.resume(routines.get(collection, task, name))
    out.print(f"routine {_label(routine)} resumed; next run {_when(routine.next_run_at)}", highlight=False)


@routine_app.command("run-now")
def routine_run_now(collection: Collection, task: TaskName, name: Name) -> None:
    """Ask the server to run it once now, paused or not."""
    with refusals():
        from pier.lifecycle.wiring import Services
        from pier.routines import Routines

        services = Services()
        routines = Routines(services.store)
        with audited(services.store, "routine run-now", collection, f"{task}/{name}"):
            routines.request_run_now(routines.get(collection, task, name))
    poll = services.settings.routine_poll_sec
    out.print(
        f"routine {collection}/{task}/{name}: a `pier serve` on this store starts its run within {poll:g}s "
        "(PIER_ROUTINE_POLL_SEC); `pier runs` shows it",
        highlight=False,
    )


@routine_app.command("delete")
def routine_delete(collection: Collection, task: TaskName, name: Name) -> None:
    """Delete it; the runs it started are kept."""
    with refusals():
        routines = _routines()
        with audited(routines.store, "routine delete", collection, f"{task}/{name}"):
            routines.delete(routines.get(collection, task, name))
    out.print(f"routine {collection}/{task}/{name} deleted", highlight=False)
