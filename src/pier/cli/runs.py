"""`pier runs` and `pier logs`: the runs on this machine's store, and a run's log."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from pier.cli.console import emit, out, run_id, show_list, terminal_safe
from pier.cli.orphans import end_orphans
from pier.cli.summary import record_json

if TYPE_CHECKING:
    from pier.record import Trajectory


def runs_command(
    limit: Annotated[int, typer.Option(help="how many")] = 20,
    collection: Annotated[str | None, typer.Option(help="only this collection")] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="one JSON record per line: id, status, success, collection, task, "
            "created, duration_seconds, then the whole trajectory",
        ),
    ] = False,
    raw: Annotated[
        bool,
        typer.Option(
            "--raw", help="with --json: the platform's trajectory record only, as the API serves it"
        ),
    ] = False,
) -> None:
    """Recent runs, newest first."""
    from pier.lifecycle.wiring import Services

    services = Services()
    end_orphans(services)
    records, total = services.store.list_runs(collection=collection, limit=limit)
    if as_json or raw:
        for record in records:
            if not emit(record_json(record, raw=raw)):
                return  # the reader is gone (`| head`)
        return
    show_list(RUNS_COLUMNS, [_run_row(r) for r in records], as_json, records)
    if not as_json and out.is_terminal:
        out.print(f"{len(records)} of {total} run(s)")


RUNS_COLUMNS = ("run", "collection/task", "status", "success", "created", "duration")


def _run_row(r: Trajectory) -> list[str]:
    return [
        r.trajectory_id,
        f"{r.collection}/{r.task}",
        r.status.value,
        "" if r.success is None else ("yes" if r.success else "no"),
        local_time(r.created),
        f"{r.duration_seconds:.1f}s" if r.duration_seconds is not None else "",
    ]


def local_time(moment: datetime) -> str:
    """This machine's local time with its UTC offset (stored times are UTC, and a
    time without its zone is ambiguous to whoever reads it elsewhere)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone().isoformat(sep=" ", timespec="seconds")


def logs_command(
    trajectory_id: Annotated[str, typer.Argument(help="the run's trajectory id, or its first characters")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep printing until the run ends")] = False,
) -> None:
    """A run's log, from the start."""
    from pier.lifecycle.orphans import end_orphaned_runs, owner_gone
    from pier.lifecycle.wiring import Services

    services = Services()
    end_orphans(services)
    store = services.store
    trajectory_id = run_id(store, trajectory_id)
    seq = 0
    while True:
        for event in store.events(trajectory_id, after_seq=seq):
            if not emit(f"[{event.stage or '-'}] {terminal_safe(event.line)}"):
                return  # the reader is gone (`| head`)
            seq = event.seq
        if not follow:
            return
        record = store.get_run(trajectory_id)
        if record.status.terminal and not store.events(trajectory_id, after_seq=seq, limit=1):
            return
        if not record.status.terminal and owner_gone(record):
            # Nobody will finish it: end it now, saying why (the line is printed next).
            end_orphaned_runs(store, services.settings, lambda: services.backend, judge=owner_gone)
            continue
        time.sleep(0.3)
