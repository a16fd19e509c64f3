"""Limits every request meets before any route sees it.

- Who is calling, first: a request with a body to the API (`/api/...`) that
  carries no known token is refused (401) before one byte of its body is read.
- The body limits, enforced while the body arrives: uploads
  (multipart/form-data) up to PIER_MAX_UPLOAD_BYTES, streamed to disk by the
  route; any other body up to PIER_MAX_JSON_BYTES. A declared Content-Length
  over the limit is refused before reading, and a chunked body is cut off as
  soon as it passes it. Either way: 413, naming the limit.
- A JSON body nested deeper than PIER_MAX_JSON_DEPTH is refused (422, naming
  the limit): nothing pier keeps needs more, and deeper data would reach
  recursive code (validation, masking) with no bound.
- A trailing slash is ignored: both forms of a route answer, no redirect.
- No NUL character in the path, the query or any text of a JSON body, and no
  unpaired surrogate in a JSON body: nothing pier stores can contain one
  (PostgreSQL text cannot), so such a request names nothing (404) or is refused
  naming the field (422), on every route at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.api.errors import ApiError, body
from pier.server.services.inputs import unstorable_field

PARSE_IN_THREAD_BYTES = 64 << 10  # bigger JSON bodies are parsed off the event loop


class FieldRefused(ApiError):
    """A 422 naming the field it refuses."""

    def __init__(self, field: str, message: str):
        super().__init__(422, f"{field}: {message}")
        self.errors = [{"field": field, "message": message}]


def too_large(limit: int, setting: str, what: str) -> ApiError:
    return ApiError(
        413,
        f"the request body is larger than this server accepts for {what} ({limit} bytes, {setting}): "
        f"send less per request, or ask the operator to raise {setting}",
    )


def too_deep(limit: int) -> ApiError:
    return ApiError(
        422,
        f"body: JSON nested more than {limit} levels deep (PIER_MAX_JSON_DEPTH): send flatter data",
    )


class NoTrailingSlash:
    """`/api/v1/collections/` is `/api/v1/collections`: routes answer both forms
    directly, where a redirect would lose a POST's body on some clients."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and len(path) > 1 and path.endswith("/"):
            scope = {**scope, "path": path.rstrip("/") or "/"}
            if scope.get("raw_path"):
                scope["raw_path"] = scope["raw_path"].rstrip(b"/") or b"/"
        await self.app(scope, receive, send)


class Gate:
    """Authentication before any body is read, the body limits, the JSON rules
    (depth, NUL characters) and NUL-free paths and queries."""

    def __init__(self, app: ASGIApp, *, upload_limit: int, json_limit: int, json_depth: int):
        self.app = app
        self.upload_limit = upload_limit
        self.json_limit = json_limit
        self.json_depth = json_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            receive = await self._checked(scope, receive)
        except FieldRefused as exc:
            await _refuse(send, exc, exc.errors)
            return
        except ApiError as exc:
            await _refuse(send, exc)
            return
        await self.app(scope, receive, send)

    async def _checked(self, scope: Scope, receive: Receive) -> Receive:
        if "\x00" in scope.get("path", ""):
            raise ApiError(404, "no such resource: a path cannot contain a NUL character")
        if b"%00" in scope.get("query_string", b""):
            raise ApiError(422, "a query parameter cannot contain a NUL character")
        if not _has_body(scope):
            return receive
        if scope.get("path", "").startswith("/api/"):
            await _authenticated(scope)
        upload = _content_type(scope) == b"multipart/form-data"
        limit, setting, what = (
            (self.upload_limit, "PIER_MAX_UPLOAD_BYTES", "an upload")
            if upload
            else (self.json_limit, "PIER_MAX_JSON_BYTES", "a body other than an upload")
        )
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            raise too_large(limit, setting, what)
        receive = _counting(receive, too_large(limit, setting, what), limit)
        if _content_type(scope) in (b"application/json", b"") and not upload:
            raw = await _whole_body(receive)
            if len(raw) > PARSE_IN_THREAD_BYTES:  # off the event loop: other requests go on
                await run_in_threadpool(self._check_json, raw)
            else:
                self._check_json(raw)
            return _replay(raw, receive)
        return receive

    def _check_json(self, raw: bytes) -> None:
        try:
            data = json.loads(raw) if raw.strip() else None
        except RecursionError:
            raise too_deep(self.json_depth) from None
        except ValueError:
            return  # not JSON: the route says so
        problem = json_problem(data, self.json_depth)
        if problem is not None:
            raise problem


def json_problem(data: Any, max_depth: int, field: str = "body") -> ApiError | None:
    """Why a parsed JSON value cannot be taken: too deep (422 naming the
    limit), or a key or text no store can keep (422 naming the field)."""
    if json_depth(data) > max_depth:
        return too_deep(max_depth)
    found = unstorable_field(data, field)
    if found is not None:
        message = "must not contain a NUL character or an unpaired surrogate"
        return FieldRefused(found, message)
    return None


def json_depth(data: Any) -> int:
    """How deeply a parsed JSON value nests (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        items: Iterable[Any]
        if isinstance(value, dict):
            items = value.values()
        elif isinstance(value, list):
            items = value
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((item, depth) for item in items)
    return deepest


async def _authenticated(scope: Scope) -> None:
    """401 unless the request carries a token this server knows."""
    from pier.api.auth import SAFE_METHODS, SESSION_COOKIE, caller_for_token  # auth reads the state

    token = _bearer(scope)
    if token is None and scope.get("method") in SAFE_METHODS:
        token = _cookie(scope, SESSION_COOKIE)
    if token is None:
        raise ApiError(401, "missing bearer token: send `Authorization: Bearer <token>`")
    if await caller_for_token(scope["app"].state.pier, token) is None:
        raise ApiError(
            401,
            "unknown bearer token: use a token from `pier collection create` (or a new one from the admin)",
        )


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


def _bearer(scope: Scope) -> str | None:
    value = _header(scope, b"authorization")
    if value is None:
        return None
    scheme, _, token = value.decode("latin-1").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _cookie(scope: Scope, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    return None if raw is None else cookie_parser(raw.decode("latin-1")).get(name) or None


def _has_body(scope: Scope) -> bool:
    declared = _content_length(scope)
    if declared is not None:
        return declared > 0
    return _header(scope, b"transfer-encoding") is not None


def _content_type(scope: Scope) -> bytes:
    value = _header(scope, b"content-type") or b""
    return value.split(b";")[0].strip().lower()


async def _whole_body(receive: Receive) -> bytes:
    """A JSON body, read whole: JSON bodies are small (uploads come as multipart)
    and the body limit still applies while it arrives."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()  # the disconnect, when it comes
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


def _counting(receive: Receive, error: ApiError, limit: int) -> Receive:
    received = 0

    async def counted() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                # An HTTPException: FastAPI passes it through its body parsing
                # untouched, and the app's handler answers 413.
                raise error
        return message

    return counted


def _content_length(scope: Scope) -> int | None:
    value = _header(scope, b"content-length")
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


async def _refuse(send: Send, error: ApiError, errors: list[dict[str, str]] | None = None) -> None:
    payload = json.dumps(body(str(error.detail), errors)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
