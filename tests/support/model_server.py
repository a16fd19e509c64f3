"""A scripted model server for the agent tests. It speaks the Anthropic Messages
API, the OpenAI Chat Completions and Responses APIs and the Gemini API (streaming
included), answers from model_script, and records every request it gets (path,
headers, body) so tests can assert what each CLI sent.

`mode` makes it a provider that refuses (401), rate-limits (429) or fails (500)
every model call, or one whose model never calls a tool ("notool": the agent
writes nothing); `cost` makes it report its own cost on every answer, as
OpenRouter does (`usage.cost`).

It binds to the Docker bridge gateway address only: sandboxes reach it, nothing
outside this machine can."""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support import wire
from tests.support.model_script import next_turn


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: Any
    api: str = "other"
    answered: str = ""  # what the script answered: a tool name or "text"

    @property
    def model(self) -> str | None:
        if isinstance(self.body, dict) and self.body.get("model"):
            return self.body["model"]
        if "/models/" in self.path:  # Gemini names the model in the path
            return self.path.split("/models/", 1)[1].split(":", 1)[0]
        return None

    @property
    def credential(self) -> str | None:
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:]
        return (
            self.headers.get("x-api-key")
            or self.headers.get("x-goog-api-key")
            or (self.query.get("key") or [None])[0]
        )


@dataclass
class ModelServer:
    host: str
    requests: list[Recorded] = field(default_factory=list)
    # Called with each model call before it is answered (the CLI is live, waiting).
    on_model_call: Callable[[Recorded], None] | None = None
    mode: str = "ok"  # ok, 401, 429, 500 or notool
    cost: float | None = None  # reported as usage.cost on every answer
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> ModelServer:
        server = ThreadingHTTPServer((self.host, 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True, name="model-server").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://{self.host}:{self._server.server_address[1]}"

    def record(self, item: Recorded) -> None:
        with self._lock:
            self.requests.append(item)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
        self.mode, self.cost = "ok", None

    def model_calls(self, api: str | None = None) -> list[Recorded]:
        return [r for r in list(self.requests) if r.api != "other" and (api is None or r.api == api)]


def bridge_gateway(api: Any) -> str:
    """The Docker bridge network's gateway address (docker0), from the engine."""
    config = (api.inspect_network("bridge").get("IPAM") or {}).get("Config") or [{}]
    if config[0].get("Gateway"):
        return config[0]["Gateway"]
    subnet = ipaddress.ip_network(config[0].get("Subnet", "172.17.0.0/16"))
    return str(next(subnet.hosts()))  # the engine gives the bridge the first address


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def do_GET(self) -> None:
            item = self._recorded(None)
            if item.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [], "models": []})
            else:
                self._json(404, {"error": {"message": f"no route {item.path}"}})

        def do_HEAD(self) -> None:
            self._recorded(None)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            item = self._recorded(body)
            api = wire.api_of(item.path)
            if api is None or not isinstance(body, dict):
                self._json(404, {"error": {"message": f"no route {item.path}"}})
                return
            item.api = api
            if server.on_model_call is not None:
                server.on_model_call(item)
            if server.mode in ERRORS:
                item.answered = server.mode
                error = _error(server.mode)
                if server.mode == "401":  # as some providers do: the refused key quoted back
                    error["error"]["message"] += f" ({item.credential})"
                self._json(int(server.mode), error, {"retry-after": "1"} if server.mode == "429" else {})
                return
            if item.path.endswith(":countTokens") or item.path.endswith("/count_tokens"):
                self._json(200, {"totalTokens": 100, "input_tokens": 100})
                return
            tools = {} if server.mode == "notool" else wire.tools_of(api, body)
            turn = next_turn(tools, wire.has_tool_result(api, body))
            item.answered = getattr(turn, "name", "text")
            model = item.model or "scripted"
            if wire.wants_stream(api, item.path, body):
                self._stream(
                    [
                        (event, _costed(data, server.cost))
                        for event, data in wire.stream_events(api, turn, model)
                    ]
                )
            else:
                self._json(200, _costed(wire.response(api, turn, model), server.cost))

        def _recorded(self, body: Any) -> Recorded:
            parts = urlsplit(self.path)
            item = Recorded(
                method=self.command,
                path=parts.path,
                query=parse_qs(parts.query),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            server.record(item)
            return item

        def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events: list[tuple[str | None, Any]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for event, data in events:
                chunk = (f"event: {event}\n" if event else "") + f"data: {_data(data)}\n\n"
                self.wfile.write(chunk.encode())
                self.wfile.flush()
                time.sleep(0.005)

    return Handler


# What each failing mode answers, in a shape every provider SDK reads (Anthropic's
# type/error, OpenAI's and Gemini's error.message).
ERRORS = {
    "401": ("authentication_error", "invalid x-api-key", "UNAUTHENTICATED"),
    "429": ("rate_limit_error", "rate limit reached for requests", "RESOURCE_EXHAUSTED"),
    "500": ("api_error", "internal server error", "INTERNAL"),
}


def _error(mode: str) -> dict:
    kind, message, status = ERRORS[mode]
    return {"type": "error", "error": {"type": kind, "code": int(mode), "message": message, "status": status}}


def _costed(data: Any, cost: float | None) -> Any:
    """data with usage.cost set wherever it carries usage (the answer, Anthropic's
    message_start and message_delta, the Responses events)."""
    if cost is None or not isinstance(data, dict):
        return data
    data = dict(data)
    if isinstance(data.get("usage"), dict):
        data["usage"] = {**data["usage"], "cost": cost}
    for holder in ("message", "response"):
        inner = data.get(holder)
        if isinstance(inner, dict) and isinstance(inner.get("usage"), dict):
            data[holder] = {**inner, "usage": {**inner["usage"], "cost": cost}}
    return data


def _data(data: Any) -> str:
    return data if isinstance(data, str) else json.dumps(data)
