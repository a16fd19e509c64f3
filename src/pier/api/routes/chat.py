"""POST /v1/chat/completions, the platform's OpenAI-compatible endpoint.

With a `jetty` block asking for a runbook (`"runbook": true`), the request is
an ordinary run of `jetty.task` (see pier.server.services.chat): without
`stream` the answer comes when the run has ended, a chat completion whose
message names the trajectory, its status and its outputs; with `stream: true`
it is chat-completion chunks as Server-Sent Events: the run's start, each
line of its log as it is written, then that final message and `[DONE]`.
Either way `jetty` in the answer carries the run's ids and status. The same
route answers at /chat/completions, where an OpenAI client whose `base_url`
is the server itself sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from pier.api.auth import CallerDep
from pier.api.routes.runs import wait_for_end
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.state import StateDep
from pier.record import Trajectory
from pier.server.errors import invalid
from pier.server.services import chat as service
from pier.server.state import ApiState

router = APIRouter(tags=["chat"], responses=ERROR_RESPONSES)
BATCH = 500
POLL_SEC = 1.0


class ChatRequest(BaseModel):
    """The OpenAI fields pier reads; the others (temperature, ...) are accepted."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    stream: bool = False
    jetty: dict[str, Any] | None = Field(
        None,
        description="runbook mode: {runbook: true, collection, task, agent, model_provider, snapshot, "
        "template_variables, file_paths, files, use_trial_keys, secret_params}",
    )


def _jetty(record: Trajectory) -> dict[str, Any]:
    return {"trajectory_id": record.trajectory_id, "workflow_id": record.workflow_id,
            "collection": record.collection, "task": record.name, "status": record.status.value,
            "success": record.success}  # fmt: skip


def _completion(record: Trajectory, model: str | None) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{record.trajectory_id}",
        "object": "chat.completion",
        "created": int(record.created.timestamp()),
        "model": model or str(record.init_params.get("model") or ""),
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": service.final_message(record)},
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "jetty": _jetty(record),
    }


def _chunk(record: Trajectory, model: str | None, content: str | None, finish: str | None = None,
           role: bool = False) -> str:  # fmt: skip
    delta: dict[str, Any] = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    data = {"id": f"chatcmpl-{record.trajectory_id}", "object": "chat.completion.chunk",
            "created": int(record.created.timestamp()), "model": model or "",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "jetty": _jetty(record)}  # fmt: skip
    return f"data: {json.dumps(data)}\n\n"


@router.post("/v1/chat/completions", summary="Chat completions (OpenAI-compatible); runbook mode")
@router.post(
    "/chat/completions", include_in_schema=False
)  # an OpenAI client whose base_url is the server's root
async def chat_completions(body: ChatRequest, state: StateDep, caller: CallerDep) -> Any:
    jetty = body.jetty
    if not jetty or not jetty.get("runbook"):
        raise invalid(
            "jetty",
            "this pier serves chat completions in runbook mode: send a `jetty` block with "
            '"runbook": true, collection and task (the runbook as the system message)',
        )
    request = service.runbook_request(caller, body.model, body.messages, jetty)
    record = await run_in_threadpool(service.start, state, request)
    if body.stream:
        return StreamingResponse(
            _stream(state, record, body.model),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    ended = await wait_for_end(state, record.trajectory_id)
    return JSONResponse(_completion(ended, body.model))


async def _stream(state: ApiState, record: Trajectory, model: str | None) -> AsyncIterator[str]:
    """The run's start, its log lines as they come, its end."""
    tid, seq = record.trajectory_id, 0
    yield _chunk(record, model, f"Started run {tid} of {record.collection}/{record.name}.\n", role=True)
    wake = state.bus.subscribe(tid)
    try:
        while True:
            wake.clear()
            current = await run_in_threadpool(state.store.get_run, tid, record.collection)
            events = await run_in_threadpool(state.store.events, tid, seq, BATCH)
            if events:
                yield _chunk(current, model, "".join(f"{e.line}\n" for e in events))
                seq = events[-1].seq
            if len(events) == BATCH:
                continue
            if current.status.terminal:
                yield _chunk(current, model, "\n" + service.final_message(current), finish="stop")
                yield "data: [DONE]\n\n"
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), POLL_SEC)
    finally:
        state.bus.unsubscribe(tid, wake)
