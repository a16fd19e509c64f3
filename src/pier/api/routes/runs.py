"""Starting and cancelling runs."""

from __future__ import annotations

import asyncio
import contextlib

from fastapi import APIRouter, Header, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from pier.api.auth import CollectionDep
from pier.api.forms import accept_run
from pier.api.schemas.common import ERROR_RESPONSES, inline_schema
from pier.api.schemas.runs import (
    RunCreate,
    StatusResult,
    StatusUpdate,
    WorkflowResponse,
    multipart_schema,
)
from pier.api.state import StateDep
from pier.record import Trajectory
from pier.server.services import runs as service
from pier.server.state import ApiState

router = APIRouter(prefix="/api/v1", tags=["runs"], responses=ERROR_RESPONSES)

RUN_BODY = {
    "requestBody": {
        "required": False,
        "content": {
            "application/json": {"schema": inline_schema(RunCreate)},
            "multipart/form-data": {"schema": multipart_schema()},
        },
    }
}
SYNC_POLL_SEC = 5.0  # a missed wake-up costs at most this
KeyHeader = Header(
    None,
    alias="Idempotency-Key",
    description="any string of yours (up to 255 characters): a retry of this POST with the same key "
    "(after a timeout, say) answers with the run the first one made, never a second run",
)


@router.post("/run/{collection}/{task}", openapi_extra=RUN_BODY, summary="Start a run")
async def start_run(
    collection: CollectionDep,
    task: str,
    request: Request,
    state: StateDep,
    idempotency_key: str | None = KeyHeader,
) -> WorkflowResponse:
    """Accept a run and answer at once; it starts when a slot is free."""
    record = await accept_run(request, state, collection, task, idempotency_key)
    return WorkflowResponse.of(record, "run accepted: follow its log at /api/v1/runs/<trajectory_id>/events")


@router.post("/run-sync/{collection}/{task}", openapi_extra=RUN_BODY, summary="Run and wait for the end")
async def run_sync(
    collection: CollectionDep,
    task: str,
    request: Request,
    state: StateDep,
    idempotency_key: str | None = KeyHeader,
) -> WorkflowResponse:
    """Accept a run and answer when it has ended, with its trajectory."""
    record = await accept_run(request, state, collection, task, idempotency_key)
    ended = await wait_for_end(state, record.trajectory_id)
    return WorkflowResponse.of(ended, f"run {ended.status.value}")


async def wait_for_end(state: ApiState, trajectory_id: str) -> Trajectory:
    wake = state.bus.subscribe(trajectory_id)
    try:
        while True:
            record = await run_in_threadpool(state.store.get_run, trajectory_id)
            if record.status.terminal:
                return record
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), SYNC_POLL_SEC)
            wake.clear()
    finally:
        state.bus.unsubscribe(trajectory_id, wake)


@router.post("/trajectory/{collection}/{task}/statuses", summary="Cancel runs")
def update_statuses(
    collection: CollectionDep, task: str, body: StatusUpdate, state: StateDep
) -> StatusResult:
    """`{"<trajectory_id>": "cancelled"}` cancels each run: a pending one never
    starts, a running one loses its sandbox within seconds. A run that already
    ended keeps its status, which the answer shows."""
    return StatusResult(service.cancel(state, collection, task, list(body.root)))


class SnapshotSave(BaseModel):
    trajectory_id: str = Field(description="the run whose sandbox was kept (init_params.keep_sandbox)")


class SnapshotSaved(BaseModel):
    collection: str
    name: str
    image: str
    trajectory_id: str


@router.post("/snapshot/{collection}/{name}", summary="Save a kept sandbox as a snapshot")
def save_snapshot(collection: CollectionDep, name: str, body: SnapshotSave, state: StateDep) -> SnapshotSaved:
    """The kept sandbox of a run of the collection becomes the collection's
    snapshot NAME (pier's files and the logs removed first); the collection's
    runbooks start from it with `snapshot: NAME`. 422 when the run's sandbox is
    not kept (or expired, gone, in use), 404 for another collection's run."""
    image = service.save_snapshot(state, collection, body.trajectory_id, name)
    return SnapshotSaved(collection=collection, name=name, image=image, trajectory_id=body.trajectory_id)


class SandboxPaused(BaseModel):
    collection: str
    trajectory_id: str
    sandbox_id: str
    paused: bool = Field(description="true: its processes are frozen, its CPU free; false: running again")


@router.post("/sandbox/{collection}/{trajectory_id}/pause", summary="Pause a kept sandbox")
def pause_sandbox(collection: CollectionDep, trajectory_id: str, state: StateDep) -> SandboxPaused:
    """Freeze the processes of a run's kept sandbox (its memory and files stay,
    its CPU is free); a run that continues in it, or a snapshot save, resumes it
    first. 409 when the run's sandbox is not kept (or expired, in use), 404 for
    another collection's run."""
    sandbox_id = service.pause_sandbox(state, collection, trajectory_id, pause=True)
    return SandboxPaused(
        collection=collection, trajectory_id=trajectory_id, sandbox_id=sandbox_id, paused=True
    )


@router.post("/sandbox/{collection}/{trajectory_id}/resume", summary="Resume a paused kept sandbox")
def resume_sandbox(collection: CollectionDep, trajectory_id: str, state: StateDep) -> SandboxPaused:
    """Thaw a run's paused kept sandbox. 409 when the run's sandbox is not kept
    (or expired, in use), 404 for another collection's run."""
    sandbox_id = service.pause_sandbox(state, collection, trajectory_id, pause=False)
    return SandboxPaused(
        collection=collection, trajectory_id=trajectory_id, sandbox_id=sandbox_id, paused=False
    )
