"""Experiments: one task over a matrix of agents, models, inputs and attempts
(create, list, read with results, cancel, resume, its runs, exports). Scoped
to a collection like the other routes: a collection's token reaches its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Literal

from fastapi import APIRouter, Query, status
from fastapi.responses import PlainTextResponse, Response

from pier.api.auth import CollectionDep
from pier.api.errors import ApiError
from pier.api.forms import invalid, refuse_nul
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.schemas.experiments import ExperimentPublic, ExperimentRun
from pier.api.state import ApiState, StateDep
from pier.errors import InputError, NotFoundError
from pier.experiments import export
from pier.experiments.service import Experiment, Experiments, task_of
from pier.experiments.spec import ExperimentError, ExperimentSpec

router = APIRouter(prefix="/api/v1/experiments", tags=["experiments"], responses=ERROR_RESPONSES)
ONE = "/{collection}/{experiment_id}"


@contextmanager
def _checked() -> Iterator[None]:
    """A bad field as a 422 naming it; a state that does not allow the change as a 409."""
    try:
        yield
    except ExperimentError as exc:
        raise invalid(exc.field, exc.detail) from None
    except InputError as exc:
        raise ApiError(409, str(exc)) from None


def _service(state: ApiState) -> Experiments:
    return state.experiments


def _one(state: ApiState, collection: str, experiment_id: str) -> Experiment:
    """The experiment when it is the collection's (another's is as not found)."""
    try:
        experiment = _service(state).get(experiment_id)
    except NotFoundError:
        experiment = None
    if experiment is None or experiment.stored.collection != collection:
        raise ApiError(404, f"experiment {experiment_id!r} not found in collection {collection!r}: "
                       f"list them with GET /api/v1/experiments/{collection}")  # fmt: skip
    return experiment


@router.post("/{collection}", status_code=status.HTTP_201_CREATED, summary="Create and start an experiment")
def create_experiment(collection: CollectionDep, body: ExperimentSpec, state: StateDep) -> ExperimentPublic:
    """Checks the whole matrix first (a 422 names the field, and says how many
    runs it would have started); then its runs start, `concurrency` at a time,
    cells interleaved. Give `task` (a stored task) or `runbook` (a RUNBOOK.md's text)."""
    refuse_nul(body.model_dump())
    with _checked():
        task, task_name = task_of(state.store, collection, body, state.settings.default_snapshot)
        experiment = _service(state).create(collection, body, task, task_name)
    state.wake_experiments()
    return ExperimentPublic.of(experiment)


@router.get("/{collection}", summary="The collection's experiments, newest first")
def list_experiments(collection: CollectionDep, state: StateDep) -> list[ExperimentPublic]:
    return [ExperimentPublic.of(Experiment.of(e)) for e in state.store.list_experiments(collection)]


@router.get(ONE, summary="An experiment with its results")
def get_experiment(collection: CollectionDep, experiment_id: str, state: StateDep) -> ExperimentPublic:
    """`results`: per cell (pass rate with its Wilson interval, pass@k and pass^k
    for k up to the attempts, mean check score, eval verdicts, cost per run and
    per success, tokens, duration p50/p95, failures by stage and message,
    infrastructure failures apart), per axis value, in total, and each pair of
    values of an axis compared (difference with Newcombe's 95% interval).
    Computed from the runs' records at each read."""
    experiment = _one(state, collection, experiment_id)
    return ExperimentPublic.of(experiment, _service(state).results(experiment))


@router.post(ONE + "/cancel", summary="Cancel an experiment")
def cancel_experiment(collection: CollectionDep, experiment_id: str, state: StateDep) -> ExperimentPublic:
    """Starts no more runs and cancels those in flight; `resume` goes on later."""
    with _checked():
        experiment = _service(state).cancel(_one(state, collection, experiment_id))
    return ExperimentPublic.of(experiment)


@router.post(ONE + "/resume", summary="Resume a cancelled or stopped experiment")
def resume_experiment(collection: CollectionDep, experiment_id: str, state: StateDep) -> ExperimentPublic:
    """Goes on where it stopped; an attempt that ended is never run again."""
    with _checked():
        experiment = _service(state).resume(_one(state, collection, experiment_id))
    state.wake_experiments()
    return ExperimentPublic.of(experiment)


@router.get(ONE + "/runs", summary="An experiment's runs, one row per try")
def experiment_runs(
    collection: CollectionDep, experiment_id: str, state: StateDep,
    cell: Annotated[int | None, Query(description="only this cell's (its index)")] = None,
) -> list[ExperimentRun]:  # fmt: skip
    experiment = _one(state, collection, experiment_id)
    tries = _service(state).runs(experiment)
    found = export.rows(experiment.id, experiment.cells, tries)
    return [ExperimentRun.model_validate(row) for row in found if cell is None or row["cell"] == cell]


@router.get(
    ONE + "/export", summary="An experiment's runs as CSV or JSONL, or its trajectories as ATIF",
    response_class=PlainTextResponse,
)  # fmt: skip
def export_experiment(
    collection: CollectionDep, experiment_id: str, state: StateDep,
    format: Annotated[Literal["csv", "jsonl", "atif"], Query(description="csv, jsonl, or atif")] = "csv",
) -> Response:  # fmt: skip
    """csv/jsonl: one row per try (cell, attempt, success, score, cost, tokens,
    duration, error). atif: JSONL, one ATIF trajectory (Harbor's Agent
    Trajectory Interchange Format) per run with a transcript."""
    experiment = _one(state, collection, experiment_id)
    tries = _service(state).runs(experiment)
    name = f"experiment-{experiment.id}.{'jsonl' if format != 'csv' else 'csv'}"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    if format == "atif":
        from pier.experiments.atif import trajectories_jsonl

        body = trajectories_jsonl(state.storage, [r for _, r in tries if r is not None])
        return Response(body, media_type="application/x-ndjson", headers=headers)
    found = export.rows(experiment.id, experiment.cells, tries)
    if format == "csv":
        return Response(export.to_csv(found), media_type="text/csv", headers=headers)
    return Response(export.to_jsonl(found), media_type="application/x-ndjson", headers=headers)
