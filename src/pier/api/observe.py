"""What the API tells an operator: HTTP request metrics by templated route,
and the audit log of every change a caller makes (the routes that read them,
`/metrics` and `/api/v1/audit`, are in routes/operations.py).

One ASGI middleware, outermost, so that it sees every request, those the other
middlewares refuse included. Routes are named by their template
(`/api/v1/runs/{trajectory_id}`), never by a path, so the label stays bounded.

The audit entry of a change is written after its answer: who (the admin, or a
token's id and name), what (method and route template, the route's parameters,
and what a route adds of its own, names only), when, from where, and the
status. A request body is never read here, so a secret's value never reaches
the log.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
import uuid
from datetime import timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.api.auth import SESSION_COOKIE
from pier.db.schemas import AuditEntry, outcome_of
from pier.record import utcnow
from pier.server.state import ApiState
from pier.server.tokens import hash_token
from pier.telemetry import logs, metrics
from pier.telemetry.audit import AUDIT_DETAIL

log = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
UNMATCHED = "unmatched"
# The route parameter that names what a change is about, most specific first.
OBJECT_PARAMS = ("trajectory_id", "token_id", "routine_id", "experiment_id", "upload_id", "name", "task",
                 "collection")  # fmt: skip
PRUNE_EVERY_SEC = 600.0
REQUEST_ID = "request_id"  # request.state key: this request's id (X-Request-ID)


class Observe:
    def __init__(self, app: ASGIApp):
        self.app = app
        self._pruned = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})  # shared with the copies inner layers make of scope
        began = time.monotonic()
        status = 500
        rid = _request_id(scope)
        scope["state"][REQUEST_ID] = rid
        token = logs.request_id.set(rid)  # every log line of this request names it (PIER_LOG_FORMAT=json)

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"x-request-id", rid.encode())],
                }
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            logs.request_id.reset(token)
            method = scope.get("method", "GET")
            route, params = _route(scope)
            metrics.http_requests.labels(method, route, str(status)).inc()
            metrics.http_duration.labels(method, route).observe(time.monotonic() - began)
            if method not in SAFE_METHODS:  # refused before routing too (a bad token, a body too big)
                await self._audit(scope, method, route, params, status)

    async def _audit(
        self, scope: Scope, method: str, route: str, params: dict[str, Any], status: int
    ) -> None:
        state: ApiState | None = getattr(scope["app"].state, "pier", None)
        if state is None:
            return
        try:
            entry = await run_in_threadpool(_entry, state, scope, method, route, params, status)
            await run_in_threadpool(state.store.add_audit, entry)
            if time.monotonic() - self._pruned > PRUNE_EVERY_SEC:
                self._pruned = time.monotonic()
                cutoff = utcnow() - timedelta(days=state.settings.audit_retention_days)
                await run_in_threadpool(state.store.prune_audit, cutoff)
        except Exception as exc:  # the answer is sent; an audit write that fails must be seen, not raised
            log.error("audit: could not record %s %s (%s): %s", method, route, status, exc)


_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def _request_id(scope: Scope) -> str:
    """The client's X-Request-ID when it is a sane token, else a new one."""
    for key, value in scope.get("headers", []):
        if key.lower() == b"x-request-id":
            given = value.decode("latin-1").strip()
            if _REQUEST_ID.fullmatch(given):
                return given
    return uuid.uuid4().hex


def _route(scope: Scope) -> tuple[str, dict[str, Any]]:
    """The template of the route that answered, and its parameters: the router
    leaves both in the request's scope (this layer sits inside the one that
    copies the scope to drop a trailing slash). A request refused before the
    router saw it (the gate's 401 on a body with a bad token, a 413) is matched
    against the routes here, so it is counted and audited under its route."""
    path = getattr(scope.get("route"), "path", None)
    if path:
        return path, dict(scope.get("path_params") or {})
    method, path = scope.get("method", ""), scope.get("path", "")
    for regex, template, methods in _templates(scope.get("app")):
        found = regex.match(path)
        if found and method in methods:
            return template, found.groupdict()
    return UNMATCHED, {}


def _templates(app: Any) -> list[tuple[re.Pattern[str], str, set[str]]]:
    """The API's route templates (from its OpenAPI schema, once per app) as
    patterns: what a request refused before routing is matched against."""
    if app is None:
        return []
    cached = getattr(app.state, "pier_route_templates", None)
    if cached is None:
        try:
            paths = app.openapi().get("paths", {})
        except Exception:  # no schema: such requests stay unmatched
            paths = {}
        cached = [
            (compile_path(template)[0], template, {m.upper() for m in item})
            for template, item in paths.items()
        ]
        app.state.pier_route_templates = cached
    return cached


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def bearer_token(headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer ") and auth[7:].strip():
        return auth[7:].strip()
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == SESSION_COOKIE and value:
            return value
    return None


def _entry(
    state: ApiState, scope: Scope, method: str, route: str, params: dict[str, Any], status: int
) -> AuditEntry:
    headers = _headers(scope)
    actor, token_id, token_name, collection = "anonymous", None, None, None
    token = bearer_token(headers)
    admin = state.settings.admin_token
    if token is not None:
        if admin is not None and hmac.compare_digest(token.encode(), admin.get_secret_value().encode()):
            actor = "admin"
        else:
            known = state.store.token_for_hash(hash_token(token))
            if known is None:
                actor = "unknown-token"
            else:
                token_id, token_name, collection = known
                actor = f"token:{token_id}"
    target = {k: str(v) for k, v in params.items()}
    detail = dict(scope.get("state", {}).get(AUDIT_DETAIL) or {})
    object_id = detail.pop("object_id", None)
    if detail:
        target.update(detail)
    if route == UNMATCHED:
        target["path"] = str(scope.get("path", ""))[:255]
    if object_id is None:
        object_id = next((str(params[k]) for k in OBJECT_PARAMS if params.get(k) not in (None, "")), None)
    request_id = scope.get("state", {}).get(REQUEST_ID)
    client = scope.get("client")
    return AuditEntry(
        at=utcnow(),
        collection=str(params.get("collection") or collection)
        if (params.get("collection") or collection)
        else None,
        actor=actor,
        token_id=token_id,
        token_name=token_name,
        action=f"{method} {route}",
        target=target,
        status=status,
        client=f"{client[0]}" if client else None,
        user_agent=(headers.get("user-agent") or "")[:255] or None,
        object_id=object_id[:255] if object_id else None,
        outcome=outcome_of(status),
        request_id=request_id,
        source="api" if route.startswith("/api/") or route.startswith("/metrics") else "web",
    )
