"""Experiments on the server: one task over a matrix of agents, models, inputs
and attempts. What an experiment is, and its figures, live in pier.experiments;
here finding one as a caller may see it, starting, cancelling and resuming
(a bad field a 422 naming it, a state that does not allow the change a 409),
a cell's tries, and the exports."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from pier.db import StoredAttempt
from pier.errors import InputError, NotFoundError
from pier.experiments import export
from pier.experiments.service import Experiment, task_of
from pier.experiments.spec import Cell, ExperimentError, ExperimentSpec
from pier.record import Trajectory
from pier.server.auth import Caller
from pier.server.errors import ServiceError, invalid
from pier.server.services.inputs import refuse_nul
from pier.server.state import ApiState

Tries = list[tuple[StoredAttempt, Trajectory | None]]


@contextmanager
def _checked() -> Iterator[None]:
    """A bad field as a 422 naming it; a state that does not allow the change as a 409."""
    try:
        yield
    except ExperimentError as exc:
        raise invalid(exc.field, exc.detail) from None
    except InputError as exc:
        raise ServiceError(409, str(exc)) from None


def _found(state: ApiState, experiment_id: str) -> Experiment | None:
    try:
        return state.experiments.get(experiment_id)
    except NotFoundError:
        return None


def of_collection(state: ApiState, collection: str, experiment_id: str) -> Experiment:
    """The experiment when it is the collection's (another's is as not found)."""
    experiment = _found(state, experiment_id)
    if experiment is None or experiment.stored.collection != collection:
        raise ServiceError(404, f"experiment {experiment_id!r} not found in collection {collection!r}: "
                       f"list them with GET /api/v1/experiments/{collection}")  # fmt: skip
    return experiment


def visible(state: ApiState, caller: Caller, experiment_id: str) -> Experiment:
    """The experiment, if this caller may see it; another collection's is 'not found'."""
    experiment = _found(state, experiment_id)
    if experiment is None or not caller.may_use(experiment.stored.collection):
        raise NotFoundError(f"experiment {experiment_id!r} not found: see the experiments list")
    return experiment


def listed(state: ApiState, collection: str) -> list[Experiment]:
    """The collection's experiments, newest first."""
    return [Experiment.of(e) for e in state.store.list_experiments(collection)]


def visible_list(state: ApiState, caller: Caller) -> list[Experiment]:
    """The experiments of every collection this caller may see, newest first."""
    return [Experiment.of(e) for e in state.store.list_experiments() if caller.may_use(e.collection)]


def create(state: ApiState, collection: str, spec: ExperimentSpec) -> Experiment:
    """Checks the whole matrix first; then its runs start (the scheduler is woken)."""
    refuse_nul(spec.model_dump())
    with _checked():
        task, task_name = task_of(state.store, collection, spec, state.settings.default_snapshot)
        experiment = state.experiments.create(collection, spec, task, task_name)
    state.wake_experiments()
    return experiment


def cancel(state: ApiState, experiment: Experiment) -> Experiment:
    """Starts no more runs and cancels those in flight."""
    with _checked():
        return state.experiments.cancel(experiment)


def resume(state: ApiState, experiment: Experiment) -> Experiment:
    """Goes on where it stopped; an attempt that ended is never run again."""
    with _checked():
        resumed = state.experiments.resume(experiment)
    state.wake_experiments()
    return resumed


def results(state: ApiState, experiment: Experiment) -> dict[str, Any]:
    """Its figures, computed from the runs' records at each read."""
    return state.experiments.results(experiment)


def tries(state: ApiState, experiment: Experiment) -> Tries:
    """Every attempt with its run (None before it started)."""
    return state.experiments.runs(experiment)


def rows(state: ApiState, experiment: Experiment, cell: int | None = None) -> list[dict[str, Any]]:
    """One row per try (cell, attempt, success, score, cost, tokens, duration,
    error), or only one cell's."""
    found = export.rows(experiment.id, experiment.cells, tries(state, experiment))
    return [row for row in found if cell is None or row["cell"] == cell]


@dataclass(frozen=True)
class CellView:
    cell: Cell
    tries: Tries
    summary: dict[str, Any]  # the cell's figures, as in results()["cells"]


def cell(state: ApiState, experiment: Experiment, index: int) -> CellView:
    """One cell of the matrix: its tries and its figures; 404 past the cells."""
    if not 0 <= index < len(experiment.cells):
        raise NotFoundError(f"experiment {experiment.id} has no cell {index}: it has {len(experiment.cells)}")
    found = [(a, r) for a, r in tries(state, experiment) if a.cell == index]
    summary = next(c for c in results(state, experiment)["cells"] if c["cell"] == index)
    return CellView(experiment.cells[index], found, summary)


@dataclass(frozen=True)
class Export:
    filename: str
    media_type: str
    body: str | bytes


def exported(state: ApiState, experiment: Experiment, format: Literal["csv", "jsonl", "atif"]) -> Export:
    """csv/jsonl: one row per try. atif: JSONL, one ATIF trajectory per run with a transcript."""
    found = tries(state, experiment)
    name = f"experiment-{experiment.id}.{'jsonl' if format != 'csv' else 'csv'}"
    if format == "atif":
        from pier.experiments.atif import trajectories_jsonl

        body = trajectories_jsonl(state.storage, [r for _, r in found if r is not None])
        return Export(name, "application/x-ndjson", body)
    table = export.rows(experiment.id, experiment.cells, found)
    if format == "csv":
        return Export(name, "text/csv", export.to_csv(table))
    return Export(name, "application/x-ndjson", export.to_jsonl(table))
