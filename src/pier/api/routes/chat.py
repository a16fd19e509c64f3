"""POST /v1/chat/completions, the platform's OpenAI-compatible endpoint.

Without a `jetty` block asking for a runbook it is a model proxy (see
pier.server.services.passthrough): the body goes to the provider through pier's
model gateway with the collection's key (or the server's trial key), and the
provider's answer comes back as it came, streamed when `stream: true`; pier's
own refusals are in OpenAI's error shape. No header of the request is
forwarded.

With a `jetty` block asking for a runbook (`"runbook": true`), the request is
an ordinary run of `jetty.task` (see pier.server.services.chat): without
`stream` the answer comes when the run has ended, a chat completion whose
message names the trajectory, its status and its outputs; with `stream: true`
it is chat-completion chunks as Server-Sent Events: the run's start, each
line of its log as it is written, then that final message and `[DONE]`.
Either way `jetty` in the answer carries the run's ids and status. The same
route answers at /chat/completions and /api/v1/chat/completions, where an
OpenAI client whose `base_url` is the server itself, or its /api/v1, sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response, StreamingResponse
from httpx_sse import EventSource
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from pier.api.auth import CallerDep
from pier.api.routes.runs import wait_for_end
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.state import StateDep
from pier.gateway.proxy import DROP_RESPONSE
from pier.gateway.server import UPSTREAM_TIMEOUT
from pier.record import Trajectory
from pier.server.auth import Caller
from pier.server.services import chat as service
from pier.server.services import passthrough
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
        "template_variables, file_paths, files, use_trial_keys, secret_params}; without runbook: true, "
        "passthrough to the provider, with {collection (the admin token's), model_provider (openai, "
        "openrouter), use_trial_keys}",
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


@router.post(
    "/v1/chat/completions", summary="Chat completions (OpenAI-compatible): passthrough or runbook mode"
)
@router.post("/api/v1/chat/completions", include_in_schema=False)  # base_url = the server's /api/v1
@router.post("/chat/completions", include_in_schema=False)  # base_url = the server's root
async def chat_completions(body: ChatRequest, state: StateDep, caller: CallerDep) -> Any:
    jetty = body.jetty
    if not isinstance(jetty, dict) or not jetty.get("runbook"):
        return await _passthrough(state, caller, body.model_dump(exclude_unset=True))
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


async def _passthrough(state: ApiState, caller: Caller, payload: dict[str, Any]) -> Response:
    """The provider's answer, through the gateway: as it came (a stream relayed
    chunk by chunk), its usage added to the collection's once it ended."""
    try:
        call = await run_in_threadpool(passthrough.prepare, state, caller, payload)
    except passthrough.Refused as exc:
        return _openai_error(exc.status, exc.kind, exc.message, exc.param)
    client = _gateway_client()
    headers = {"authorization": f"Bearer {call.grant.token}", "content-type": "application/json",
               "accept": "text/event-stream" if call.stream else "application/json"}  # fmt: skip
    try:
        answer = await client.send(client.build_request("POST", call.url, content=call.body, headers=headers),
                                   stream=True)  # fmt: skip
    except httpx.HTTPError as exc:
        await run_in_threadpool(passthrough.finish, state, call)
        return _openai_error(502, "upstream_unreachable", f"pier's model gateway did not answer: {exc}")
    kept = {k: v for k, v in answer.headers.items() if k not in DROP_RESPONSE and k not in ("date", "server")}
    streamed = (
        call.stream
        and answer.status_code < 400
        and "text/event-stream" in answer.headers.get("content-type", "")
    )
    if not streamed:
        try:
            content = await answer.aread()
        finally:
            await answer.aclose()
            await run_in_threadpool(passthrough.finish, state, call)
        return Response(content, status_code=answer.status_code, headers=kept)

    async def relay() -> AsyncIterator[bytes]:
        try:
            if call.hide_usage:  # drop the usage chunk pier asked for; every other event as it came
                async for event in EventSource(answer).aiter_sse():
                    if _usage_only(event.data):
                        continue
                    named = f"event: {event.event}\n" if event.event and event.event != "message" else ""
                    yield f"{named}data: {event.data}\n\n".encode()
            else:
                async for chunk in answer.aiter_bytes():
                    yield chunk
        finally:  # also when the client hung up, which cancels this task: the usage is still added
            with anyio.CancelScope(shield=True):
                await answer.aclose()
                await run_in_threadpool(passthrough.finish, state, call)

    kept.update({"cache-control": "no-cache", "x-accel-buffering": "no"})
    return StreamingResponse(relay(), status_code=answer.status_code, headers=kept)


_clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}


def _gateway_client() -> httpx.AsyncClient:
    """The client to the loopback gateway, one per event loop and kept: making
    one loads TLS certificates, which took 200-500 ms a call (bench/passthrough.py).
    The gateway is on loopback: no proxy of the environment stands between."""
    loop = asyncio.get_running_loop()
    for closed in [other for other in _clients if other.is_closed()]:
        del _clients[closed]
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = httpx.AsyncClient(timeout=UPSTREAM_TIMEOUT, trust_env=False,
                                                    follow_redirects=False)  # fmt: skip
    return client


def _usage_only(data: str) -> bool:
    """A stream's usage chunk: no choices, only usage."""
    try:
        parsed = json.loads(data)
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("choices") == [] and parsed.get("usage") is not None


def _openai_error(status: int, kind: str, message: str, param: str | None = None) -> JSONResponse:
    """pier's refusal as OpenAI's SDKs read an error (error.message), and as pier's other answers do (detail)."""
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": kind, "param": param}, "detail": message},
        status_code=status,
    )
