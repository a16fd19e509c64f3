"""A scripted model server for the agent tests. It speaks the Anthropic Messages
API, the OpenAI Chat Completions and Responses APIs and the Gemini API (streaming
included), answers from model_script, and records every request it gets (path,
headers, body) so tests can assert what each CLI sent.

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
from tests.support.model_script import Text, next_turn


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
    # What a request without tools is answered (a workflow's chat or judge step); default "ok".
    reply: Callable[[Recorded], str] | None = None
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
            if item.path.endswith(":countTokens") or item.path.endswith("/count_tokens"):
                self._json(200, {"totalTokens": 100, "input_tokens": 100})
                return
            tools = wire.tools_of(api, body)
            turn = next_turn(tools, wire.has_tool_result(api, body))
            if server.reply is not None and not tools:
                turn = Text(server.reply(item))
            item.answered = getattr(turn, "name", "text")
            model = item.model or "scripted"
            if wire.wants_stream(api, item.path, body):
                self._stream(wire.stream_events(api, turn, model))
            else:
                self._json(200, wire.response(api, turn, model))

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

        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
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


def _data(data: Any) -> str:
    return data if isinstance(data, str) else json.dumps(data)
