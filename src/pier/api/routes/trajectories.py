"""Reading runs: one trajectory, pages of them (filtered by label), their
outputs as a zip, a task's stats; labels; runs made elsewhere (ingest); a
run's log by workflow id."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from pier.api.auth import CallerDep, CollectionDep
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.schemas.runs import TrajectoryPage
from pier.api.schemas.trajectories import (
    IngestRequest,
    IngestResult,
    LabelAdded,
    LabelCreate,
    TaskStats,
    WorkflowLogs,
)
from pier.api.state import StateDep
from pier.record import RunStatus, Trajectory
from pier.server.services import runs as service

router = APIRouter(prefix="/api/v1", tags=["trajectories"], responses=ERROR_RESPONSES)

MAX_PAGE = 100
MAX_LOG_LINES = 5000


def _page(records: list[Trajectory], total: int, page: int, limit: int) -> TrajectoryPage:
    return TrajectoryPage(
        trajectories=records, total=total, page=page, limit=limit, has_more=page * limit < total
    )


@router.get("/db/trajectory/{collection}/{task}/{trajectory_id}", summary="One run")
def get_trajectory(collection: CollectionDep, task: str, trajectory_id: str, state: StateDep) -> Trajectory:
    """Status, `steps.run` (inputs; outputs with files, checks, usage and pier's
    stages), labels and error."""
    return service.get(state, collection, task, trajectory_id)


@router.get("/db/trajectories/{collection}/{task}", summary="A task's runs, newest first")
def list_trajectories(
    collection: CollectionDep,
    task: str,
    state: StateDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    label: Annotated[list[str], Query(description="key or key=value; repeat to require several")] = [],  # noqa: B006
) -> TrajectoryPage:
    records, total = service.of_task(state, collection, task, limit=limit, page=page, labels=label)
    return _page(records, total, page, limit)


@router.get(
    "/trajectory/{collection}/{task}/{trajectory_id}/download",
    summary="The run's outputs as a zip",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"application/zip": {}}, "description": "results/, assets/, logs/, run.json"}
    },
)
def download(collection: CollectionDep, task: str, trajectory_id: str, state: StateDep) -> StreamingResponse:
    return StreamingResponse(
        service.outputs_zip(state, collection, task, trajectory_id),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{trajectory_id}.zip"'},
    )


@router.get("/runs", summary="Runs across the collections this token may see, newest first")
def list_runs(
    state: StateDep,
    caller: CallerDep,
    collection: Annotated[str | None, Query(description="only this collection")] = None,
    task: Annotated[str | None, Query(description="only this task")] = None,
    status: Annotated[list[RunStatus], Query(description="repeat for several")] = [],  # noqa: B006
    success: Annotated[
        bool | None, Query(description="only runs that succeeded (true) or not (false)")
    ] = None,
    label: Annotated[list[str], Query(description="key or key=value; repeat to require several")] = [],  # noqa: B006
    since: Annotated[datetime | None, Query(description="created at or after (ISO 8601)")] = None,
    until: Annotated[datetime | None, Query(description="created before (ISO 8601)")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
) -> TrajectoryPage:
    """A collection token sees its own collection's runs; the admin every
    collection's, or the one named."""
    records, total = service.find(
        state, caller, collection=collection, task=task, statuses=status, success=success, labels=label,
        since=since, until=until, limit=limit, page=page,
    )  # fmt: skip
    return _page(records, total, page, limit)


@router.post("/trajectory/{collection}/{task}/{trajectory_id}/labels", summary="Label a run")
def add_label(
    collection: CollectionDep, task: str, trajectory_id: str, body: LabelCreate, state: StateDep
) -> LabelAdded:
    """Labels show on the trajectory and filter lists (`?label=key=value`)."""
    label, labels = service.add_label(
        state, collection, task, trajectory_id, body.key, body.value, body.author
    )
    return LabelAdded(trajectory_id=trajectory_id, label=label, labels=labels)


@router.get("/db/stats/{collection}/{task}", summary="A task's runs in figures")
def get_stats(collection: CollectionDep, task: str, state: StateDep) -> TaskStats:
    """Counts by status, success rate (of ended runs), durations, reported cost."""
    return service.stats(state, collection, task)


@router.post("/trajectories/{collection}/{task}/ingest", summary="Store a run made elsewhere")
def ingest_trajectory(
    collection: CollectionDep, task: str, body: IngestRequest, state: StateDep
) -> IngestResult:
    """Idempotent on `trajectory_id`: a second push replaces the first."""
    record = service.ingest(state, collection, task, body)
    return IngestResult(
        trajectory_id=record.trajectory_id,
        name=record.name,
        storage_path=record.storage_path,
        status=record.status,
        labels=record.labels,
    )


@router.get("/workflows-logs/{workflow_id}", summary="A run's log by workflow id")
def workflow_logs(
    workflow_id: str,
    state: StateDep,
    caller: CallerDep,
    after: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_LOG_LINES)] = MAX_LOG_LINES,
) -> WorkflowLogs:
    """`workflow_id` is `<collection>-<task>--<trajectory_id>` (a bare
    trajectory id works too); lines after `after`, at most `limit`."""
    found = service.log_of_workflow(state, caller, workflow_id, after, limit)
    return WorkflowLogs(
        workflow_id=found.record.workflow_id,
        trajectory_id=found.record.trajectory_id,
        status=found.record.status,
        logs=found.lines,
        next_after=found.next_after,
        has_more=found.has_more,
    )
