"""Reading runs: one trajectory, pages of them (filtered by label), their
outputs as a zip, a task's stats; labels; runs made elsewhere (ingest); a
run's log by workflow id."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from pier.api.auth import CallerDep, CollectionDep
from pier.api.errors import ApiError
from pier.api.forms import invalid
from pier.api.ingest import ingest
from pier.api.lookups import run_of, visible_run
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
from pier.api.stats import task_stats
from pier.db.runs import LabelFilter
from pier.errors import NotFoundError
from pier.names import check_task_name, trajectory_id_of
from pier.record import Label, RunStatus, Trajectory, storage_key
from pier.storage.archive import zip_stream

router = APIRouter(prefix="/api/v1", tags=["trajectories"], responses=ERROR_RESPONSES)

MAX_PAGE = 100
MAX_LOG_LINES = 5000
STATS_LIMIT = 100_000


@router.get("/db/trajectory/{collection}/{task}/{trajectory_id}", summary="One run")
def get_trajectory(collection: CollectionDep, task: str, trajectory_id: str, state: StateDep) -> Trajectory:
    """Status, `steps.run` (inputs; outputs with files, checks, usage and pier's
    stages), labels and error."""
    return run_of(state.store, collection, task, trajectory_id)


@router.get("/db/trajectories/{collection}/{task}", summary="A task's runs, newest first")
def list_trajectories(
    collection: CollectionDep,
    task: str,
    state: StateDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    label: Annotated[list[str], Query(description="key or key=value; repeat to require several")] = [],  # noqa: B006
) -> TrajectoryPage:
    records, total = state.store.list_runs(
        collection, task, limit=limit, offset=(page - 1) * limit, labels=[_label_filter(v) for v in label]
    )
    return TrajectoryPage(
        trajectories=records,
        total=total,
        page=page,
        limit=limit,
        has_more=page * limit < total,
    )


@router.get(
    "/trajectory/{collection}/{task}/{trajectory_id}/download",
    summary="The run's outputs as a zip",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"application/zip": {}}, "description": "results/, assets/, logs/, run.json"}
    },
)
def download(collection: CollectionDep, task: str, trajectory_id: str, state: StateDep) -> StreamingResponse:
    record = run_of(state.store, collection, task, trajectory_id)
    if not record.status.terminal:
        raise ApiError(
            409, f"run {trajectory_id} is {record.status.value}: download its outputs when it has ended"
        )
    try:  # made while it is sent: nothing whole in memory or on disk
        chunks = zip_stream(state.storage, storage_key(collection, task, trajectory_id))
    except NotFoundError:
        raise NotFoundError(f"no stored outputs for run {trajectory_id!r} ({collection}/{task})") from None
    return StreamingResponse(
        chunks,
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
    if collection is not None:
        caller.check(collection)
    elif not caller.admin:
        collection = caller.collection
    records, total = state.store.list_runs(
        collection,
        task,
        limit=limit,
        offset=(page - 1) * limit,
        statuses=status or None,
        labels=[_label_filter(v) for v in label],
        since=_utc(since),
        until=_utc(until),
        success=success,
    )
    return TrajectoryPage(
        trajectories=records, total=total, page=page, limit=limit, has_more=page * limit < total
    )


def _utc(moment: datetime | None) -> datetime | None:
    """A time without a zone is taken as UTC, as the store keeps times."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def _label_filter(text: str) -> LabelFilter:
    key, sep, value = text.partition("=")
    if not key.strip():
        raise invalid("label", f"{text!r} names no key: write key or key=value")
    return key, value if sep else None


@router.post("/trajectory/{collection}/{task}/{trajectory_id}/labels", summary="Label a run")
def add_label(
    collection: CollectionDep, task: str, trajectory_id: str, body: LabelCreate, state: StateDep
) -> LabelAdded:
    """Labels show on the trajectory and filter lists (`?label=key=value`)."""
    store = state.store
    run_of(store, collection, task, trajectory_id)
    label = Label(key=body.key, value=body.value, author=body.author or collection)
    store.add_labels(trajectory_id, [label], collection=collection)
    labels = store.get_run(trajectory_id, collection).labels
    return LabelAdded(trajectory_id=trajectory_id, label=label, labels=labels)


@router.get("/db/stats/{collection}/{task}", summary="A task's runs in figures")
def get_stats(collection: CollectionDep, task: str, state: StateDep) -> TaskStats:
    """Counts by status, success rate (of ended runs), durations, reported cost."""
    records, _ = state.store.list_runs(collection, task, limit=STATS_LIMIT)
    return task_stats(collection, task, records)


@router.post("/trajectories/{collection}/{task}/ingest", summary="Store a run made elsewhere")
def ingest_trajectory(
    collection: CollectionDep, task: str, body: IngestRequest, state: StateDep
) -> IngestResult:
    """Idempotent on `trajectory_id`: a second push replaces the first."""
    record = ingest(state.store, state.storage, collection, check_task_name(task), body)
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
    store = state.store
    trajectory_id = trajectory_id_of(workflow_id)
    try:
        record = visible_run(store, trajectory_id, caller.may_use, workflow_id)
    except NotFoundError:
        raise NotFoundError(f"run {trajectory_id!r} not found: check the workflow id") from None
    events = store.events(trajectory_id, after_seq=after, limit=limit + 1)
    return WorkflowLogs(
        workflow_id=record.workflow_id,
        trajectory_id=trajectory_id,
        status=record.status,
        logs=events[:limit],
        next_after=events[:limit][-1].seq if events else after,
        has_more=len(events) > limit,
    )
