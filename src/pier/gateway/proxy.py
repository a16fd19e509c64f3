"""The gateway's one route: take a sandbox's request, find its run by the token it
sent where the provider key would go, swap in the real key, forward it to the
provider and stream the answer back unchanged, counting usage on the way.

Paths are /<provider><the provider's own path>: /anthropic/v1/messages goes to
<upstream origin>/v1/messages. Starlette parses requests and httpx talks to the
provider; pier parses no HTTP itself."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from pier.gateway.connect import attempt
from pier.gateway.grants import Grant, Grants
from pier.gateway.usage import (
    Answer,
    CallUsage,
    answer_of,
    call_usage,
    error_message,
    is_generation,
    model_of,
)
from pier.outbound import OutboundPolicy
from pier.telemetry import metrics, tracing

log = logging.getLogger(__name__)

# Where each provider takes its key; every other credential header is dropped.
KEY_HEADER = {"anthropic": "x-api-key", "google": "x-goog-api-key"}  # others: Authorization: Bearer
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")
# Hop-by-hop (RFC 9110 7.6.1) or recomputed by httpx / the server.
DROP_REQUEST = {"host", "content-length", "connection", "keep-alive", "proxy-authorization",
                "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "accept-encoding"}  # fmt: skip
DROP_RESPONSE = {"content-length", "content-encoding", "connection", "keep-alive", "transfer-encoding",
                 "trailer", "upgrade"}  # fmt: skip
MAX_USAGE_BODY = 32 << 20  # answers larger than this are forwarded but not read for usage
MAX_ERROR_BODY = 64 << 10  # of an error answer, what is read for its message


def create_app(grants: Grants, client: httpx.AsyncClient, policy: OutboundPolicy | None = None) -> Starlette:
    """The gateway's app; every connection its client makes for a grant is held
    to policy plus what the operator named for the grant's upstream."""
    policy = policy or OutboundPolicy()

    async def forward(request: Request) -> Response:
        token = sent_token(request)
        grant = grants.find(token)
        if grant is None:
            return error(401, "unknown_token", "this token is not a live pier run's: it expired with its run")
        if not request.url.path.startswith(f"/{grant.provider}/"):
            return error(404, "wrong_provider", f"this run's gateway path starts /{grant.provider}/")
        refused = grant.admit()
        if refused is not None:
            return error(
                402,
                "budget_exceeded",
                f"pier: this run's model budget is used up ({refused}); the run fails. "
                "Raise model_budget on the task, or do less per run",
            )
        return await _proxy(request, grant, client, policy)

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)])


def sent_token(request: Request) -> str | None:
    """The credential the CLI sent, wherever its provider's convention puts it."""
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return (
        request.headers.get("x-api-key")
        or request.headers.get("x-goog-api-key")
        or request.query_params.get("key")
    )


def error(status: int, kind: str, message: str) -> JSONResponse:
    """An error every provider SDK reads: Anthropic's `type`/`error`, OpenAI's and
    Gemini's `error.message`."""
    body = {"type": "error", "error": {"type": kind, "code": kind, "message": message, "status": kind}}
    return JSONResponse(body, status_code=status)


def upstream_request(request: Request, grant: Grant, body: bytes, client: httpx.AsyncClient) -> httpx.Request:
    origin = urlsplit(grant.upstream)
    path = request.url.path.removeprefix(f"/{grant.provider}")
    params = httpx.QueryParams(
        [(k, grant.key if v == grant.token else v) for k, v in request.query_params.multi_items()]
    )
    headers = {
        k: v for k, v in request.headers.items() if k not in DROP_REQUEST and k not in CREDENTIAL_HEADERS
    }
    name = KEY_HEADER.get(grant.provider)
    if name:
        headers[name] = grant.key
    else:
        headers["authorization"] = f"Bearer {grant.key}"
    url = httpx.URL(scheme=origin.scheme, host=origin.hostname or "", port=origin.port, path=path)
    return client.build_request(request.method, url, params=params, headers=headers, content=body)


async def _proxy(
    request: Request, grant: Grant, client: httpx.AsyncClient, policy: OutboundPolicy
) -> Response:
    body = await request.body()
    call = _Call(grant, request.url.path, body)
    tried = attempt(policy, grant.allowed)
    try:
        upstream = await client.send(upstream_request(request, grant, body, client), stream=True)
    except httpx.HTTPError as exc:
        if tried.refused is not None:
            grant.upstream_refused = grant.upstream_refused or tried.refused
            log.warning("gateway: refused %s's upstream for run %s: %s", grant.provider, grant.trajectory_id,
                        tried.refused)  # fmt: skip
            call.ended(403, None, error_type="upstream_refused")
            # 403: the CLIs retry a 5xx for minutes, and this answer will not change.
            return error(403, "upstream_refused", f"pier: {tried.refused}; the run fails")
        log.warning("gateway: %s unreachable for run %s: %s", grant.provider, grant.trajectory_id, exc)
        call.ended(502, None, error_type=_error_type(exc))
        grant.answered(502, f"pier's gateway could not reach {grant.provider}: {exc}")
        return error(502, "upstream_unreachable", f"pier gateway could not reach {grant.provider}: {exc}")
    call.first_byte()
    headers = {k: v for k, v in upstream.headers.items() if k not in DROP_RESPONSE}
    counting = is_generation(request.url.path) and upstream.status_code < 400
    model = model_of(request.url.path, _json(body)) if counting else None
    return StreamingResponse(
        _relay(upstream, grant, model, counting, call),
        status_code=upstream.status_code,
        headers=headers,
        background=BackgroundTask(upstream.aclose),
    )


async def _relay(
    upstream: httpx.Response, grant: Grant, model: str | None, counting: bool, call: _Call
) -> AsyncIterator[bytes]:
    """The answer's bytes as they come; its usage is recorded when it ends, or when
    the client hangs up (codex closes the stream once it read the final event)."""
    kept: list[bytes] = []
    size = 0
    used = None
    answer = None
    failed = upstream.status_code >= 400  # its message is kept: the run's verdict may name it
    try:
        async for chunk in upstream.aiter_bytes():
            if (counting and size <= MAX_USAGE_BODY) or (failed and size <= MAX_ERROR_BODY):
                kept.append(chunk)
                size += len(chunk)
            yield chunk
    finally:
        if counting and size <= MAX_USAGE_BODY:
            content_type = upstream.headers.get("content-type", "")
            whole = b"".join(kept)
            used = call_usage(content_type, whole, grant.provider, model)
            answer = answer_of(content_type, whole)
            if used is not None:
                grant.record(used)
        grant.answered(
            upstream.status_code, error_message(b"".join(kept)[:MAX_ERROR_BODY]) if failed else None
        )
        call.ended(upstream.status_code, used, model, answer)


class _Call:
    """One request's metrics and GenAI span: its model is read from the body
    (the answer's usage names it too), its times from the monotonic clock."""

    def __init__(self, grant: Grant, path: str, body: bytes):
        self.grant = grant
        self.request_model = model_of(path, _json(body)) if is_generation(path) else None
        self.model = metrics.model_label(grant.provider, self.request_model)
        self.generation = is_generation(path)
        self.began = time.monotonic()
        self.began_ns = time.time_ns()

    def first_byte(self) -> None:
        metrics.gateway_ttfb.labels(self.grant.provider, self.model).observe(time.monotonic() - self.began)

    def ended(
        self,
        status: int,
        used: CallUsage | None,
        model: str | None = None,
        answer: Answer | None = None,
        error_type: str | None = None,
    ) -> None:
        """error_type: why pier answered for the provider (the provider's own
        errors are named by their status code)."""
        provider = self.grant.provider
        name = metrics.model_label(provider, model) if model else self.model
        metrics.gateway_requests.labels(provider, name, str(status)).inc()
        metrics.gateway_duration.labels(provider, name).observe(time.monotonic() - self.began)
        if used is not None:
            metrics.gateway_tokens.labels(provider, name, "input").inc(used.prompt_tokens)
            metrics.gateway_tokens.labels(provider, name, "output").inc(used.completion_tokens)
            metrics.gateway_tokens.labels(provider, name, "cache_read").inc(used.cache_read_tokens)
            if used.cost_usd is not None:
                metrics.gateway_cost.labels(provider, name).inc(used.cost_usd)
        if self.generation:
            answer = answer or Answer()
            tracing.model_call_span(
                self.grant.trajectory_id,
                provider=provider,
                model=model or self.request_model,  # the name asked for, not the metric's label
                started_ns=self.began_ns,
                status=status,
                input_tokens=None if used is None else used.prompt_tokens,
                output_tokens=None if used is None else used.completion_tokens,
                cache_read_tokens=None if used is None else used.cache_read_tokens,
                address=urlsplit(self.grant.upstream).hostname,
                port=_port(self.grant.upstream),
                response_model=answer.model,
                response_id=answer.id,
                finish_reasons=list(answer.finish_reasons),
                error_type=error_type,
            )


def _error_type(exc: Exception) -> str:
    """error.type of a call that never got an answer: the exception's class, as
    the conventions name one (httpx.ConnectTimeout, httpx.ConnectError ...)."""
    return f"{type(exc).__module__.split('.')[0]}.{type(exc).__name__}"


def _port(url: str) -> int | None:
    """The upstream's port, as the GenAI conventions' server.port wants it."""
    parts = urlsplit(url)
    return parts.port or {"https": 443, "http": 80}.get(parts.scheme)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None
