"""A Unix-socket proxy in front of the Docker engine's socket that fails the
first N requests of a kind, as an engine under strain does: it answers 503
(or 500) itself, resets the connection before the engine sees the request, or
passes the request on and loses the answer (the engine did the work, the
client never hears of it). Point pier at it with PIER_DOCKER_HOST.

One request per connection: the proxy asks the engine to close after each
answer (`Connection: close`, echoed back), so it reads requests, never
responses, and an upgraded connection (an exec's stream) is piped as is."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path

ENGINE_SOCKET = "/var/run/docker.sock"


@dataclass
class Fault:
    """Fail the first `times` requests whose "METHOD path" matches `pattern`.
    `how`: a status, e.g. "503" (an error answer, with `message`), "reset" (closed
    unanswered, never passed on), "lose" (passed on, its answer dropped)."""

    pattern: str
    how: str
    times: int
    message: str = "the engine is busy (injected by the test)"
    seen: int = 0  # matching requests so far
    failed: int = 0

    def matches(self, request_line: str) -> bool:
        return re.search(self.pattern, request_line) is not None


@dataclass
class EngineProxy:
    path: Path
    faults: list[Fault] = field(default_factory=list)
    upstream: str = ENGINE_SOCKET
    requests: list[str] = field(default_factory=list)  # "METHOD path" of every request, in order
    _sock: socket.socket | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def start(self) -> EngineProxy:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.path))
        self._sock.listen(64)
        threading.Thread(target=self._accept, daemon=True, name="engine-proxy").start()
        return self

    def stop(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def count(self, pattern: str) -> int:
        with self._lock:
            return sum(1 for line in self.requests if re.search(pattern, line))

    def _accept(self) -> None:
        assert self._sock is not None
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            head, rest = _read_head(client)
            if head is None:
                return
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            method, target = line.split(" ")[:2]
            what = f"{method} {target}"
            fault = self._fault_for(what)
            if fault is not None and fault.how.isdigit():
                body = json.dumps({"message": fault.message}).encode()
                reason = HTTPStatus(int(fault.how)).phrase
                client.sendall(
                    f"HTTP/1.1 {fault.how} {reason}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
                return
            if fault is not None and fault.how == "reset":
                return  # closed unanswered
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.upstream)
            upgrade = re.search(rb"(?im)^connection:\s*upgrade", head) is not None
            if not upgrade:
                head = re.sub(rb"(?im)^connection:[^\r\n]*\r\n", b"", head)
                head = head[:-2] + b"Connection: close\r\n\r\n"
            upstream.sendall(head + rest)
            if fault is not None and fault.how == "lose":
                _pipe(client, upstream, stop_after_first_answer=True)
                upstream.close()
                return
            _pipe(client, upstream)
            upstream.close()
        except OSError:
            pass
        finally:  # shutdown first: it wakes the thread reading the client, and the client sees the end
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                client.close()

    def _fault_for(self, what: str) -> Fault | None:
        with self._lock:
            self.requests.append(what)
            for fault in self.faults:
                if fault.matches(what):
                    fault.seen += 1
                    if fault.failed < fault.times:
                        fault.failed += 1
                        return fault
                    return None
        return None


def _read_head(conn: socket.socket) -> tuple[bytes | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    end = data.index(b"\r\n\r\n") + 4
    return data[:end], data[end:]


def _pipe(client: socket.socket, upstream: socket.socket, stop_after_first_answer: bool = False) -> None:
    """Bytes both ways until the engine closes; with stop_after_first_answer,
    until the engine's first answer bytes arrive (which are dropped)."""

    def up() -> None:
        with contextlib.suppress(OSError):
            while chunk := client.recv(65536):
                upstream.sendall(chunk)
            upstream.shutdown(socket.SHUT_WR)

    threading.Thread(target=up, daemon=True).start()
    while True:
        chunk = upstream.recv(65536)
        if not chunk or stop_after_first_answer:
            return
        client.sendall(chunk)
