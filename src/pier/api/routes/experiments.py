"""Experiments: one task over a matrix of agents, models, inputs and attempts
(create, list, read with results, cancel, resume, its runs, exports). Scoped
to a collection like the other routes: a collection's token reaches its own."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, status
from fastapi.responses import PlainTextResponse, Response

from pier.api.auth import CollectionDep
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.schemas.experiments import ExperimentPublic, ExperimentRun
from pier.api.state import StateDep
from pier.experiments.spec import ExperimentSpec
from pier.server.services import experiments as service

router = APIRouter(prefix="/api/v1/experiments", tags=["experiments"], responses=ERROR_RESPONSES)
ONE = "/{collection}/{experiment_id}"


@router.post("/{collection}", status_code=status.HTTP_201_CREATED, summary="Create and start an experiment")
def create_experiment(collection: CollectionDep, body: ExperimentSpec, state: StateDep) -> ExperimentPublic:
    """Checks the whole matrix first (a 422 names the field, and says how many
    runs it would have started); then its runs start, `concurrency` at a time,
    cells interleaved. Give `task` (a stored task) or `runbook` (a RUNBOOK.md's text)."""
    return ExperimentPublic.of(service.create(state, collection, body))


@router.get("/{collection}", summary="The collection's experiments, newest first")
def list_experiments(collection: CollectionDep, state: StateDep) -> list[ExperimentPublic]:
    return [ExperimentPublic.of(e) for e in service.listed(state, collection)]


@router.get(ONE, summary="An experiment with its results")
def get_experiment(collection: CollectionDep, experiment_id: str, state: StateDep) -> ExperimentPublic:
    """`results`: per cell (pass rate with its Wilson interval, pass@k and pass^k
    for k up to the attempts, mean check score, eval verdicts, cost per run and
    per success, tokens, duration p50/p95, failures by stage and message,
    infrastructure failures apart), per axis value, in total, and each pair of
    values of an axis compared (difference with Newcombe's 95% interval).
    Computed from the runs' records at each read."""
    experiment = service.of_collection(state, collection, experiment_id)
    return ExperimentPublic.of(experiment, service.results(state, experiment))


@router.post(ONE + "/cancel", summary="Cancel an experiment")
def cancel_experiment(collection: CollectionDep, experiment_id: str, state: StateDep) -> ExperimentPublic:
    """Starts no more runs and cancels those in flight; `resume` goes on later."""
    experiment = service.of_collection(state, collection, experiment_id)
    return ExperimentPublic.of(service.cancel(state, experiment))


@router.post(ONE + "/resume", summary="Resume a cancelled or stopped experiment")
def resume_experiment(collection: CollectionDep, experiment_id: str, state: StateDep) -> ExperimentPublic:
    """Goes on where it stopped; an attempt that ended is never run again."""
    experiment = service.of_collection(state, collection, experiment_id)
    return ExperimentPublic.of(service.resume(state, experiment))


@router.get(ONE + "/runs", summary="An experiment's runs, one row per try")
def experiment_runs(
    collection: CollectionDep, experiment_id: str, state: StateDep,
    cell: Annotated[int | None, Query(description="only this cell's (its index)")] = None,
) -> list[ExperimentRun]:  # fmt: skip
    experiment = service.of_collection(state, collection, experiment_id)
    return [ExperimentRun.model_validate(row) for row in service.rows(state, experiment, cell)]


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
    experiment = service.of_collection(state, collection, experiment_id)
    found = service.exported(state, experiment, format)
    headers = {"Content-Disposition": f'attachment; filename="{found.filename}"'}
    return Response(found.body, media_type=found.media_type, headers=headers)
