"""Routines: a task run on a cron schedule (create, list, get, update, delete,
pause, resume, run-now, its runs). Every path answers with and without a
trailing slash."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, status

from pier.api.auth import CollectionDep
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.schemas.routines import RoutineCreate, RoutinePublic, RoutineRuns, RoutineUpdate
from pier.api.schemas.runs import WorkflowResponse
from pier.api.state import StateDep
from pier.db import StoredRoutine
from pier.server.services import routines as service
from pier.server.state import ApiState

router = APIRouter(prefix="/api/v1/routines", tags=["routines"], responses=ERROR_RESPONSES)
ONE = "/{collection}/{task}/{name}"
MAX_RUNS = 100


def route(method: str, path: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `path` (the app's NoTrailingSlash middleware serves `path/` too)."""

    def register(endpoint: Callable[..., Any]) -> Callable[..., Any]:
        router.add_api_route(path, endpoint, methods=[method], **options)
        return endpoint

    return register


def public(state: ApiState, routine: StoredRoutine) -> RoutinePublic:
    return RoutinePublic.of(routine, service.secret_names(state, routine))


@route("GET", "/{collection}", summary="The collection's routines")
def list_collection_routines(collection: CollectionDep, state: StateDep) -> list[RoutinePublic]:
    return [public(state, r) for r in service.of_collection(state, collection)]


@route("GET", "/{collection}/{task}", summary="A task's routines")
def list_task_routines(collection: CollectionDep, task: str, state: StateDep) -> list[RoutinePublic]:
    return [public(state, r) for r in service.of_collection(state, collection, task)]


@route("POST", "/{collection}/{task}", status_code=status.HTTP_201_CREATED, summary="Create a routine")
def create_routine(
    collection: CollectionDep, task: str, body: RoutineCreate, state: StateDep
) -> RoutinePublic:
    """Runs the task with `init_params` at every tick of `cron_expression` in
    `timezone`, or of the platform's `cadence` (UTC) with its
    `init_params_overrides`, from the next tick on. A `manual` cadence is a
    saved preset that only run-now starts."""
    routine = service.create(
        state, collection, task, body.name, body.cron_expression, body.timezone,
        body.params(), body.active(), body.description, body.extras(),
    )  # fmt: skip
    return public(state, routine)


@route("GET", ONE, summary="A routine")
def get_routine(collection: CollectionDep, task: str, name: str, state: StateDep) -> RoutinePublic:
    return public(state, service.get(state, collection, task, name))


@route("PATCH", ONE, summary="Change a routine")
def update_routine(
    collection: CollectionDep, task: str, name: str, body: RoutineUpdate, state: StateDep
) -> RoutinePublic:
    """Only the fields sent change (any subset of the cadence or cron
    expression, overrides, secrets, paused and the webhook); a new schedule
    counts from now."""
    return public(state, service.update(state, collection, task, name, body.changes(), body.extras()))


@route("DELETE", ONE, summary="Delete a routine")
def delete_routine(collection: CollectionDep, task: str, name: str, state: StateDep) -> RoutinePublic:
    """The routine as it was; the runs it started stay readable."""
    return public(state, service.delete(state, collection, task, name))


@route("POST", ONE + "/pause", summary="Pause a routine")
def pause_routine(collection: CollectionDep, task: str, name: str, state: StateDep) -> RoutinePublic:
    return public(state, service.pause(state, collection, task, name))


@route("POST", ONE + "/resume", summary="Resume a routine")
def resume_routine(collection: CollectionDep, task: str, name: str, state: StateDep) -> RoutinePublic:
    """It fires from the next tick after now; ticks missed while paused are not made up."""
    return public(state, service.resume(state, collection, task, name))


@route("POST", ONE + "/run-now", summary="Run a routine once now")
def run_routine_now(collection: CollectionDep, task: str, name: str, state: StateDep) -> WorkflowResponse:
    """One run now, paused or not; the schedule is unchanged."""
    record = service.run_now(state, collection, task, name)
    return WorkflowResponse.of(record, f"routine {name!r} started run {record.trajectory_id}")


@route("GET", ONE + "/runs", summary="The runs a routine started")
def list_routine_runs(
    collection: CollectionDep,
    task: str,
    name: str,
    state: StateDep,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS)] = 20,
) -> RoutineRuns:
    """Newest first; each carries `triggered_by_routine_id`."""
    routine, records = service.runs(state, collection, task, name, limit)
    return RoutineRuns(routine_id=routine.id, trajectories=records)
