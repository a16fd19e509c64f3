"""A run's live log as Server-Sent Events.

Each log line is one event (`id` = its seq, `event: log`, `data` = JSON
{seq, ts, stage, line}); the stream replays from after `Last-Event-ID` (header,
or `last_event_id` in the query for clients that cannot set headers), follows
the run while it goes on, and ends with `event: end` (data {status}) once the
run has ended and every line has been sent.

A database that stops answering while a stream is open does not cut it: the
stream says so in a comment line, keeps the connection alive and reads again
each POLL_SEC for up to PIER_DB_RETRY_SEC (a run's own writes wait as long),
then goes on from the last line it sent. Cut, a browser's EventSource would
reconnect into a 503, which ends it for good.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials
from starlette.concurrency import run_in_threadpool

from pier.api.auth import CallerDep, bearer, request_token
from pier.api.errors import ApiError
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.state import StateDep
from pier.db.retry import unreachable
from pier.db.schemas import Event
from pier.record import Trajectory
from pier.server.services import runs
from pier.server.state import ApiState
from pier.server.tokens import hash_token

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/v1", tags=["runs"], responses=ERROR_RESPONSES)

BATCH = 500
POLL_SEC = 1.0  # the store is polled this often even without a wake-up (other writers)
KEEPALIVE_SEC = 15.0  # a comment line keeps proxies from closing an idle stream
RETRY_MS = 2000
MAX_SEQ = 2**31 - 1  # the store's seq column is a 32-bit integer
ADMIN_STREAMS = 1000  # the admin token's streams: it belongs to no collection's quota


def log_event(event: Event) -> str:
    data = json.dumps(
        {"seq": event.seq, "ts": event.ts.isoformat(), "stage": event.stage, "line": event.line}
    )
    return f"id: {event.seq}\nevent: log\ndata: {data}\n\n"


def end_event(status: str) -> str:
    return f"event: end\ndata: {json.dumps({'status': status})}\n\n"


@router.get(
    "/runs/{trajectory_id}/events",
    summary="Follow a run's log (Server-Sent Events)",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "log events, then an end event"}},
)
async def run_events(
    trajectory_id: str,
    request: Request,
    state: StateDep,
    caller: CallerDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    after: Annotated[int | None, Query(alias="last_event_id", ge=0, le=MAX_SEQ)] = None,
) -> StreamingResponse:
    """At most the collection's `streams_per_token` quota of streams open per
    token (429 with Retry-After beyond)."""
    record = await run_in_threadpool(runs.visible, state, caller, trajectory_id)
    start = _start_after(last_event_id, after)
    quota = state.quotas.of(caller.collection).streams_per_token if caller.collection else ADMIN_STREAMS
    release = state.streams.take(hash_token(request_token(request, credentials) or ""), quota)
    stream = _follow(state, record, start, release)
    weakref.finalize(stream, release)  # a stream never started (the client left at once) frees its slot too
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _start_after(header: str | None, query: int | None) -> int:
    if header is None or not header.strip():
        return query or 0
    try:
        value = int(header)
    except ValueError:
        raise ApiError(422, f"Last-Event-ID must be an event id (a number), got {header!r}") from None
    return min(max(value, 0), MAX_SEQ)


async def _follow(
    state: ApiState, record: Trajectory, seq: int, release: Callable[[], None]
) -> AsyncIterator[str]:
    trajectory_id, collection = record.trajectory_id, record.collection
    wake = state.bus.subscribe(trajectory_id)
    try:
        yield f"retry: {RETRY_MS}\n\n"
        idle = 0.0
        outage: float | None = None  # when the database stopped answering this stream
        while True:
            wake.clear()  # before reading, so a line written meanwhile wakes the next wait
            try:
                status = (await run_in_threadpool(state.store.get_run, trajectory_id, collection)).status
                events = await run_in_threadpool(state.store.events, trajectory_id, seq, BATCH)
            except Exception as exc:
                now = time.monotonic()
                if unreachable(exc) is None or (
                    outage is not None and now - outage > state.settings.db_retry_sec
                ):
                    raise
                if outage is None:
                    outage = now
                    log.warning("run %s's log stream: the database is unreachable; waiting", trajectory_id)
                yield ": the database is unreachable; waiting\n\n"
                await asyncio.sleep(POLL_SEC)
                continue
            outage = None
            for event in events:
                yield log_event(event)
                seq = event.seq
            if len(events) == BATCH:
                continue
            if status.terminal:  # read after the status: every line of an ended run is in
                yield end_event(status.value)
                return
            idle = await _wait(wake, idle)
            if idle >= KEEPALIVE_SEC:
                idle = 0.0
                yield ": keep-alive\n\n"
    finally:
        state.bus.unsubscribe(trajectory_id, wake)
        release()


async def _wait(wake: asyncio.Event, idle: float) -> float:
    """Wait for a wake-up or POLL_SEC; how long the stream has been idle."""
    try:
        await asyncio.wait_for(wake.wait(), POLL_SEC)
        return 0.0
    except TimeoutError:
        return idle + POLL_SEC
