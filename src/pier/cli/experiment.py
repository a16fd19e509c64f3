"""`pier experiment ...`: experiments on this machine's store, checked as the API
checks them. `run` and `resume` work the experiment in this process (the same
dispatcher and executor `pier serve` uses: in-process, or the Temporal fleet
with PIER_EXECUTOR=temporal) and show a live table until it ends; with
--detach they leave it to a `pier serve` on the same store."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pier.cli.console import audited, err, fail, out, refusals

if TYPE_CHECKING:
    from rich.table import Table

    from pier.experiments.service import Experiment
    from pier.server.state import ApiState

experiment_app = typer.Typer(
    help="Experiments: one task over a matrix of agents, models, inputs and attempts.", no_args_is_help=True
)

ExperimentId = Annotated[str, typer.Argument(help="the experiment's id (`pier experiment list`)")]
AsJson = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]
Detach = Annotated[bool, typer.Option(help="do not work it here: a `pier serve` on this store does")]
REFRESH_SEC = 1.0


def _state(caller_keys: bool = False) -> ApiState:
    """The server's state on this machine's store; with caller_keys, its
    experiments' runs get the keys and secrets they name from this shell's
    environment, as `pier run` gives them (over the collection's own)."""
    from pier.server.build import build_state
    from pier.settings import get_settings

    state = build_state(get_settings())
    if caller_keys:
        from pier.server.experiments import DispatcherStarter

        starter = state.experiments.starter
        assert isinstance(starter, DispatcherStarter)
        starter.secrets = _caller_secrets
    return state


def _caller_secrets(task: Any, init_params: Any) -> dict[str, str]:
    import os

    from pier.lifecycle.sandbox_env import caller_env
    from pier.tasks import resolve

    return caller_env(resolve(task, dict(init_params)), os.environ)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _interval(found: list[float] | None) -> str:
    return "-" if not found else f"{found[0]:.0%}-{found[1]:.0%}"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def results_table(experiment: Experiment, found: dict[str, Any]) -> Table:
    """Cells as rows: attempts ended of planned, pass rate with its interval, pass@k, cost."""
    from rich.table import Table

    k = experiment.spec.attempts
    title = (f"experiment {experiment.stored.name} ({experiment.id[:12]}): {experiment.stored.status}, "
             f"{found['attempts_started']}/{found['runs_total']} attempts started")  # fmt: skip
    table = Table("cell", "ended", "running", "pass", "95% interval", f"pass@{k}", "cost/success", "infra",
                  title=title)  # fmt: skip
    rows = [*found["cells"], {"key": "[b]all[/b]", **found["total"]}]
    for cell in rows:
        table.add_row(
            cell["key"], f"{cell['attempts']}", str(cell["running"]), _percent(cell["pass_rate"]),
            _interval(cell["pass_rate_interval"]), _percent(cell["pass_at_k"].get(str(k))),
            _money(cell["cost_per_success"]), str(cell["infra_failures"]),
        )  # fmt: skip
    return table


def _watch(state: ApiState, experiment_id: str, detach: bool) -> None:
    """Work the experiment here with a live table, until it ends (or Ctrl-C)."""
    from rich.console import Console
    from rich.live import Live

    experiments = state.experiments
    if detach:
        out.print(f"experiment {experiment_id} stored: a `pier serve` on this store runs it; "
                  f"`pier experiment show {experiment_id}` follows it", highlight=False)  # fmt: skip
        return
    from pier.server.recovery import recover

    recover(state.dispatcher)
    state.dispatcher.executor.start()
    try:
        with Live(console=Console(), refresh_per_second=2) as live:
            while True:
                experiments.poll()
                experiment = experiments.get(experiment_id)
                live.update(results_table(experiment, experiments.results(experiment)))
                if experiment.stored.status != "running":
                    break
                time.sleep(REFRESH_SEC)
    except KeyboardInterrupt:
        err.print(f"stopped watching: `pier experiment resume {experiment_id}` goes on where it was")
    finally:
        state.dispatcher.stop()
        state.experiments.store.release_lease(experiment_id, experiments.owner)
    ended = experiments.get(experiment_id)
    if ended.stored.reason and ended.stored.status != "completed":
        err.print(f"experiment {ended.stored.status}: {ended.stored.reason}", highlight=False)


@experiment_app.command("run")
def experiment_run(
    file: Annotated[Path, typer.Argument(help="experiment.yaml (or .json)")],
    collection: Annotated[
        str, typer.Option(help="the collection its runs belong to (created when it is the local one)")
    ] = "local",
    detach: Detach = False,
) -> None:
    """Check the whole matrix, then run it, showing a live table. Its runs get
    the API keys (and the secrets their runbook names) from your environment, as
    `pier run` does; with --detach, a `pier serve` runs them with the
    collection's environment only (`pier collection env set`)."""
    from pier.experiments.service import task_of
    from pier.experiments.spec import load_file

    with refusals():
        state = _state(caller_keys=not detach)
        with audited(state.store, "experiment run", collection) as note:  # refused ones too, as the API's
            spec = load_file(file)
            if collection == "local":
                state.store.create_collection(collection)
            state.store.get_collection(collection)
            task, name = task_of(state.store, collection, spec, state.settings.default_snapshot)
            experiment = state.experiments.create(collection, spec, task, name)
            note.object_id = experiment.id
    err.print(f"experiment {experiment.id}: {len(experiment.cells)} cell(s) x {spec.attempts} attempt(s) = "
              f"{experiment.total_runs} run(s)", highlight=False)  # fmt: skip
    _watch(state, experiment.id, detach)


@experiment_app.command("list")
def experiment_list(
    collection: Annotated[str | None, typer.Option(help="only this collection's")] = None,
    as_json: AsJson = False,
) -> None:
    """Experiments, newest first."""
    import json

    from rich.table import Table

    from pier.lifecycle.start import Services

    found = Services().store.list_experiments(collection)
    if as_json:
        out.print_json(json.dumps([{"id": e.id, "collection": e.collection, "name": e.name, "status": e.status,
                                    "created_at": e.created_at.isoformat()} for e in found]))  # fmt: skip
        return
    if not found:
        err.print("no experiments")
        return
    table = Table("id", "collection", "name", "status", "cells", "created")
    for e in found:
        table.add_row(e.id, e.collection, e.name, e.status, str(len(e.cells["cells"])),
                      e.created_at.strftime("%Y-%m-%d %H:%M:%S UTC"))  # fmt: skip
    out.print(table)


@experiment_app.command("show")
def experiment_show(experiment_id: ExperimentId, as_json: AsJson = False) -> None:
    """Its results: per cell, per axis, comparisons with their intervals."""
    with refusals():
        experiments = _state().experiments
        experiment = experiments.get(experiment_id)
        found = experiments.results(experiment)
    if as_json:
        from pier.server.models import ExperimentPublic

        out.print_json(ExperimentPublic.of(experiment, found).model_dump_json())
        return
    out.print(results_table(experiment, found))
    for comparison in found["comparisons"]:
        mark = "differs" if comparison["significant"] else "no clear difference"
        low, high = comparison["interval"]
        out.print(f"{comparison['axis']}: {comparison['a']} - {comparison['b']} = {comparison['difference']:+.0%} "
                  f"(95% {low:+.0%} to {high:+.0%}): {mark}", highlight=False)  # fmt: skip
    if experiment.stored.reason:
        out.print(f"{experiment.stored.status}: {experiment.stored.reason}", highlight=False)


@experiment_app.command("cancel")
def experiment_cancel(experiment_id: ExperimentId) -> None:
    """Start no more runs and cancel those in flight."""
    with refusals():
        experiments = _state().experiments
        with audited(experiments.store, "experiment cancel", object_id=experiment_id) as note:
            found = experiments.get(experiment_id)
            note.collection = found.stored.collection
            experiments.cancel(found)
    out.print(f"experiment {experiment_id} cancelled; `pier experiment resume {experiment_id}` goes on",
              highlight=False)  # fmt: skip


@experiment_app.command("resume")
def experiment_resume(experiment_id: ExperimentId, detach: Detach = False) -> None:
    """Go on where it stopped; no attempt that ended runs again."""
    with refusals():
        state = _state(caller_keys=not detach)
        experiments = state.experiments
        with audited(experiments.store, "experiment resume", object_id=experiment_id) as note:
            experiment = experiments.get(experiment_id)
            note.collection = experiment.stored.collection
            if experiment.stored.status != "running":
                experiments.resume(experiment)
    _watch(state, experiment_id, detach)


@experiment_app.command("export")
def experiment_export(
    experiment_id: ExperimentId,
    format: Annotated[
        str, typer.Option(help="csv, jsonl (one row per run) or atif (one trajectory a line)")
    ] = "csv",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write here instead of stdout")
    ] = None,
) -> None:
    """Its runs as CSV or JSONL rows, or their transcripts as ATIF trajectories."""
    if format not in ("csv", "jsonl", "atif"):
        raise fail(f"--format {format!r}: use csv, jsonl or atif")
    from pier.experiments import export

    with refusals():
        state = _state()
        experiment = state.experiments.get(experiment_id)
        tries = state.experiments.runs(experiment)
        if format == "atif":
            from pier.experiments.atif import trajectories_jsonl

            text = trajectories_jsonl(state.storage, [r for _, r in tries if r is not None])
        else:
            rows = export.rows(experiment.id, experiment.cells, tries)
            text = export.to_csv(rows) if format == "csv" else export.to_jsonl(rows)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        err.print(f"wrote {output}", highlight=False)
