"""One abusive collection and one well-behaved one on a real `pier serve`: the
abuser's tools (a webhook receiver that never answers, hundreds of live log
streams, a flood of runs, uploads past its quota) and the measures of what the
other collection sees (API latency, the wait for its run to start, its webhook).
Shared by tests/integration/tenancy and bench/tenancy.py."""

from __future__ import annotations

import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from tests.support.api_server import Collection, Server


class HangingReceiver:
    """Accepts connections and reads what comes, never answers: a webhook
    receiver that hangs. Counts the connections it got."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(1024)
        self.connections = 0
        self._held: list[socket.socket] = []
        self._stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/hook"

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            self._held.append(conn)  # read nothing back, answer nothing

    def stop(self) -> None:
        self._stopped.set()
        self._sock.close()
        for conn in self._held:
            conn.close()


@dataclass
class Delivered:
    at: float  # time.time() when it arrived
    delivery_id: str


@dataclass
class CountingReceiver:
    """Answers 200 at once; keeps each delivery's arrival time and id."""

    got: list[Delivered] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def start(self) -> CountingReceiver:
        return self.start_on(0)

    def start_on(self, port: int) -> CountingReceiver:
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                got.append(Delivered(time.time(), self.headers.get("webhook-id", "")))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def latencies_ms(collection: Collection, count: int = 40) -> list[float]:
    """GET the collection's task list `count` times; each answer's time in ms."""
    times = []
    with collection.client() as c:
        for _ in range(count):
            started = time.perf_counter()
            r = c.get(f"/api/v1/tasks/{collection.name}")
            times.append((time.perf_counter() - started) * 1000)
            assert r.status_code == 200, r.text
    return times


def p50_p95(values: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(values, n=20, method="inclusive")
    return statistics.median(values), cuts[18]


def open_streams(
    server: Server, token: str, trajectory_id: str, count: int
) -> tuple[list[socket.socket], list[bytes]]:
    """Open `count` live log streams of one run with one token; the sockets
    (kept open) and each answer's status line."""
    socks, statuses = [], []
    request = (
        f"GET /api/v1/runs/{trajectory_id}/events HTTP/1.1\r\nHost: pier\r\n"
        f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        sock.sendall(request)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
        statuses.append(head.split(b"\r\n", 1)[0])
        if head.startswith(b"HTTP/1.1 200"):
            socks.append(sock)
        else:
            sock.close()
    return socks, statuses


def flood_runs(collection: Collection, task: str, count: int, **body: object) -> list[httpx.Response]:
    with collection.client() as c:
        return [c.post(f"/api/v1/run/{collection.name}/{task}", json=body) for _ in range(count)]


def start_wait_sec(record: dict) -> float:
    """From accepted to started, by the run's record."""
    created = datetime.fromisoformat(record["created"].replace("Z", "+00:00"))
    started = datetime.fromisoformat(record["started"].replace("Z", "+00:00"))
    return (started - created).total_seconds()


def ended_at(record: dict) -> float:
    return datetime.fromisoformat(record["ended"].replace("Z", "+00:00")).timestamp()
