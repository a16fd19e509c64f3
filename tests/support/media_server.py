"""A scripted image, video and vision provider on 127.0.0.1 for the workflow
tests: Replicate's predictions API (each prediction answered succeeded at
once, its output a URL of a file this server serves), Gemini's
generateContent answering an inline image, and OpenAI's chat completions
(a vision step's) answering a fixed text. It records every request (path,
headers, body) and counts the connections it accepted."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A 1x1 PNG and a few bytes standing for a video: what the provider "makes".
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
MP4 = b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 32


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class MediaServer:
    requests: list[Seen] = field(default_factory=list)
    connections: int = 0
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> MediaServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True, name="media-server").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def seen(self, start: str) -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(start)]


def _handler(server: MediaServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            with server._lock:
                server.connections += 1

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _record(self, body: Any) -> None:
            with server._lock:
                server.requests.append(
                    Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._record(None)
            if self.path == "/files/out.png":
                return self._send(200, PNG, "image/png")
            if self.path == "/files/out.mp4":
                return self._send(200, MP4, "video/mp4")
            self._send(404, b'{"detail": "not found"}', "application/json")

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            self._record(body)
            if "/predictions" in self.path:  # Replicate
                video = "video" in self.path
                output = [f"{server.url}/files/out.{'mp4' if video else 'png'}"]
                model = self.path.split("/v1/models/", 1)[-1].split("/predictions", 1)[0]
                answer = {"id": "pred-1", "model": model, "version": "v" * 64, "status": "succeeded",
                          "created_at": "2026-01-01T00:00:00Z", "input": (body or {}).get("input"),
                          "output": output if not video else output[0], "error": None, "logs": "",
                          "urls": {"get": f"{server.url}/v1/predictions/pred-1"}}  # fmt: skip
                return self._send(201, json.dumps(answer).encode(), "application/json")
            if ":generateContent" in self.path:  # Gemini
                answer = {"candidates": [{"content": {"role": "model", "parts": [
                    {"text": "here it is"},
                    {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(PNG).decode()}}]}}],
                    "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 1290, "totalTokenCount": 1297}}  # fmt: skip
                return self._send(200, json.dumps(answer).encode(), "application/json")
            if self.path.endswith("/chat/completions"):  # a vision step
                answer = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                          "choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": "a small square"}}],
                          "usage": {"prompt_tokens": 100, "completion_tokens": 4, "total_tokens": 104}}  # fmt: skip
                return self._send(200, json.dumps(answer).encode(), "application/json")
            self._send(404, b'{"error": {"message": "no such route"}}', "application/json")

    return Handler
