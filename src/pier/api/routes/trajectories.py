"""Reading runs: one record, pages of them, and their outputs as a zip."""

from __future__ import annotations

import tempfile
from typing import Annotated, BinaryIO, cast

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from pier.api.auth import CollectionDep
from pier.api.errors import ApiError
from pier.api.lookups import run_of
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.schemas.runs import RunPublic, TrajectoryPage
from pier.api.state import get_state

router = APIRouter(prefix="/api/v1", tags=["trajectories"], responses=ERROR_RESPONSES)

MAX_PAGE = 100
CHUNK = 1 << 16
SPOOL_BYTES = 8 << 20  # zips up to this stay in memory; larger ones go to a temp file


@router.get("/db/trajectory/{collection}/{task}/{trajectory_id}", summary="One run")
def get_trajectory(collection: CollectionDep, task: str, trajectory_id: str, request: Request) -> RunPublic:
    """Status, steps with their times, outputs, checks and error."""
    return RunPublic.of(run_of(get_state(request).store, collection, task, trajectory_id))


@router.get("/db/trajectories/{collection}/{task}", summary="A task's runs, newest first")
def list_trajectories(
    collection: CollectionDep,
    task: str,
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
) -> TrajectoryPage:
    records, total = get_state(request).store.list_runs(
        collection, task, limit=limit, offset=(page - 1) * limit
    )
    return TrajectoryPage(
        trajectories=[RunPublic.of(r) for r in records],
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
def download(collection: CollectionDep, task: str, trajectory_id: str, request: Request) -> StreamingResponse:
    state = get_state(request)
    record = run_of(state.store, collection, task, trajectory_id)
    if not record.status.terminal:
        raise ApiError(
            409, f"run {trajectory_id} is {record.status.value}: download its outputs when it has ended"
        )
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - closed after the response
    try:
        state.storage.write_run_zip(collection, task, trajectory_id, cast(BinaryIO, spool))
    except BaseException:
        spool.close()
        raise
    size = spool.tell()
    spool.seek(0)
    return StreamingResponse(
        iter(lambda: spool.read(CHUNK), b""),
        media_type="application/zip",
        headers={
            "Content-Disposition": f'attachment; filename="{trajectory_id}.zip"',
            "Content-Length": str(size),
        },
        background=BackgroundTask(spool.close),
    )
