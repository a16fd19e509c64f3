"""Limits every request meets before any route sees it.

- The body limit (PIER_MAX_UPLOAD_BYTES), enforced while the body arrives: a
  declared Content-Length over it is refused before reading, and a chunked body
  is cut off as soon as it passes it. Either way: 413.
- A trailing slash is ignored: both forms of a route answer, no redirect.
- No NUL character in the path or the query: nothing pier stores can contain
  one (PostgreSQL text cannot), so such a request names nothing: 404 / 422.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.api.errors import ApiError


def too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"the request body is larger than this server accepts ({limit} bytes): send fewer or smaller "
        "files per request, or raise PIER_MAX_UPLOAD_BYTES",
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


class NoNul:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if "\x00" in scope.get("path", ""):
                await _refuse(send, ApiError(404, "no such resource: a path cannot contain a NUL character"))
                return
            if b"%00" in scope.get("query_string", b""):
                await _refuse(send, ApiError(422, "a query parameter cannot contain a NUL character"))
                return
        await self.app(scope, receive, send)


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _refuse(send, too_large(self.limit))
            return
        await self.app(scope, self._counting(receive), send)

    def _counting(self, receive: Receive) -> Receive:
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # An HTTPException: FastAPI passes it through its body parsing
                    # untouched, and the app's handler answers 413.
                    raise too_large(self.limit)
            return message

        return counted


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Send, error: ApiError) -> None:
    payload = json.dumps({"detail": error.detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
