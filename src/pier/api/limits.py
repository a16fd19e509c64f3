"""Limits every request meets before any route sees it.

- The body limit (PIER_MAX_UPLOAD_BYTES), enforced while the body arrives: a
  declared Content-Length over it is refused before reading, and a chunked body
  is cut off as soon as it passes it. Either way: 413.
- A trailing slash is ignored: both forms of a route answer, no redirect.
- No NUL character in the path, the query or any text of a JSON body, and no
  unpaired surrogate in a JSON body: nothing pier stores can contain one
  (PostgreSQL text cannot), so such a request names nothing (404) or is refused
  naming the field (422), on every route at once.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.api.errors import ApiError, body


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
            if _is_json(scope):
                try:
                    body = await _whole_body(receive)
                except ApiError as exc:  # the body limit, met while reading
                    await _refuse(send, exc)
                    return
                field = _unstorable_field(body)
                if field is not None:
                    message = "must not contain a NUL character or an unpaired surrogate"
                    await _refuse(
                        send, ApiError(422, f"{field}: {message}"), [{"field": field, "message": message}]
                    )
                    return
                receive = _replay(body, receive)
        await self.app(scope, receive, send)


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return value.split(b";")[0].strip().lower() == b"application/json"
    return False


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


def _unstorable_field(body: bytes) -> str | None:
    """The dotted path of the first key or text in a JSON body that no store can
    keep; None when there is none, or the body is not JSON (the route says so)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return unstorable_field(data)


def _unstorable(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode()
    except UnicodeEncodeError:  # an unpaired surrogate, which JSON's \uD800 can spell
        return True
    return False


def unstorable_field(value: object, field: str = "body") -> str | None:
    """The first field (dotted path) whose key or text no store can keep."""
    if isinstance(value, str):
        return field if _unstorable(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{field}.{key}" if field != "body" else str(key)
            found = _printable(name) if _unstorable(str(key)) else unstorable_field(item, name)
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = unstorable_field(item, f"{field}.{index}")
            if found:
                return found
    return None


def _printable(name: str) -> str:
    return name.replace("\x00", "\\0").encode("utf-8", "backslashreplace").decode()


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


async def _refuse(send: Send, error: ApiError, errors: list[dict[str, str]] | None = None) -> None:
    payload = json.dumps(body(str(error.detail), errors)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
