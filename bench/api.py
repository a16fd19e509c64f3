"""The run API's figures, in one run: requests per second for accepting runs
(`POST /api/v1/run`, accept only) and for reading one (`GET /api/v1/db/trajectory`),
and the delay from an agent printing a line to an SSE client receiving it.

Accepting is measured on a server whose pool never starts a run (its
executor's start is a no-op), so the figure is the API's own cost: checking the
run, storing it and its request, queueing it. The SSE delay is measured on a
normal server with a script runbook that prints its own clock every 50 ms.
Needs a Docker engine and the image (default pier-base:bookworm) for that part.

    uv run python bench/api.py [--posts 2000] [--gets 4000] [--concurrency 32] [--lines 100]
                               [--image pier-base:bookworm] [--db-url postgresql+psycopg://...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy

ADMIN = "bench-admin-token"
PAUSED_SERVER = """
import sys, uvicorn
from pier.executors.inprocess import InProcessExecutor
InProcessExecutor.start = lambda self: None  # accept only: no run ever starts
from pier.api.app import create_app
uvicorn.run(create_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""
NORMAL_SERVER = PAUSED_SERVER.replace("InProcessExecutor.start = lambda self: None", "pass")


def runbook(script: str, image: str) -> str:
    return f'---\nagent: script\nsnapshot: ""\nimage: {image}\n---\n# bench\n\n```bash\n{script}\n```\n'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(
        self, code: str, home: Path, db_url: str | None, port: int | None = None, python: str | None = None
    ):
        """`python`: the interpreter that serves (another checkout's venv, whose pier
        it imports); this one's by default."""
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PIER_HOME": str(home), "PIER_ADMIN_TOKEN": ADMIN, "PIER_SWEEP_FOREIGN": "false"}
        if db_url:
            env["PIER_DATABASE_URL"] = db_url
        self.log = open(home / "server.log", "wb")  # noqa: SIM115 - the child writes it
        self.proc = subprocess.Popen([python or sys.executable, "-c", code, str(self.port)], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited: see {home / 'server.log'}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise SystemExit("the server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()


def setup_collection(url: str, task: str, text: str) -> str:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30) as admin:
        made = admin.post("/api/v1/collections", json={"name": "bench"})
        made.raise_for_status()
        token = made.json()["token"]
        put = admin.put(
            f"/api/v1/tasks/bench/{task}", content=text, headers={"Content-Type": "text/markdown"}
        )
        put.raise_for_status()
    return token


def http_request(method: str, path: str, token: str, body: bytes = b"") -> bytes:
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, bytes]:
    """One request on a kept-alive connection: (status, body)."""
    writer.write(request)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, await reader.readexactly(length)


async def load(
    port: int, count: int, concurrency: int, request: Callable[[int], bytes]
) -> tuple[float, list[float], list[bytes]]:
    """(requests per second, latencies in seconds, bodies) for `count` requests
    over `concurrency` kept-alive connections. A bare asyncio client: on a small
    machine a full HTTP client would spend more CPU than the server it measures."""
    latencies: list[float] = []
    bodies: list[bytes] = []
    queue = iter(range(count))

    async def connection() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for n in queue:
                began = time.perf_counter()
                status, body = await exchange(reader, writer, request(n))
                latencies.append(time.perf_counter() - began)
                if status != 200:
                    raise SystemExit(f"HTTP {status}: {body[:300]!r}")
                bodies.append(body)
        finally:
            writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(concurrency)))
    return count / (time.perf_counter() - began), latencies, bodies


def percentile(values: list[float], q: float) -> float:
    """The q-th quantile (0-1), numpy's linear interpolation."""
    return float(numpy.quantile(values, q))


def show(label: str, rate: float, latencies: list[float]) -> None:
    print(
        f"{label:<44} {rate:8.0f} req/s   latency median {statistics.median(latencies) * 1000:6.1f} ms, "
        f"p95 {percentile(latencies, 0.95) * 1000:6.1f} ms  ({len(latencies)} requests)"
    )


@contextmanager
def store_url(db_url: str | None) -> Iterator[str | None]:
    """SQLite in the server's home (None), or a throwaway schema in db_url's
    PostgreSQL database, dropped afterwards, so the bench leaves nothing there."""
    if db_url is None:
        yield None
        return
    from pier.db.engine import scratch_schema

    yield from scratch_schema(db_url, prefix="pier_bench")


def bench_requests(args: argparse.Namespace, home: Path) -> None:
    with store_url(args.db_url) as url:
        _bench_requests(args, home, url)


def _bench_requests(args: argparse.Namespace, home: Path, db_url: str | None) -> None:
    server = Server(PAUSED_SERVER, home, db_url)
    try:
        token = setup_collection(server.url, "noop", runbook("echo hi > {{results_dir}}/x", args.image))
        post = http_request(
            "POST",
            "/api/v1/run/bench/noop",
            token,
            json.dumps({"init_params": {"vars": {"n": "1"}}}).encode(),
        )
        asyncio.run(load(server.port, 50, 4, lambda _n: post))  # warm up
        rate, latencies, bodies = asyncio.run(
            load(server.port, args.posts, args.concurrency, lambda _n: post)
        )
        show("POST /api/v1/run (accept only)", rate, latencies)
        gets = [
            http_request("GET", f"/api/v1/db/trajectory/bench/noop/{json.loads(b)['trajectory_id']}", token)
            for b in bodies
        ]
        rate, latencies, _ = asyncio.run(
            load(server.port, args.gets, args.concurrency, lambda _n: random.choice(gets))
        )
        show("GET /api/v1/db/trajectory", rate, latencies)
    finally:
        server.stop()


def follow(url: str, token: str, trajectory_id: str) -> list[float]:
    """Seconds from each `tick <epoch>` line being printed to it arriving here."""
    delays = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.stream("GET", f"{url}/api/v1/runs/{trajectory_id}/events", headers=headers, timeout=120) as r:
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            received = time.time()
            text = json.loads(line[6:]).get("line", "")
            if text.startswith("tick "):
                delays.append(received - float(text.split()[1]))
    return delays


def bench_sse(args: argparse.Namespace, home: Path) -> None:
    script = (f"for i in $(seq {args.lines}); do echo \"tick $(date +%s.%N)\"; sleep 0.05; done\n"
              "echo done > {{results_dir}}/done.txt")  # fmt: skip
    server = Server(NORMAL_SERVER, home, None)
    try:
        token = setup_collection(server.url, "ticks", runbook(script, args.image))
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as client:
            run = client.post("/api/v1/run/bench/ticks", json={})
            run.raise_for_status()
        delays = follow(server.url, token, run.json()["trajectory_id"])
    finally:
        server.stop()
    if len(delays) < args.lines:
        raise SystemExit(f"only {len(delays)} of {args.lines} lines arrived: see {home / 'server.log'}")
    print(
        f"{'SSE delay, agent prints -> client receives':<44} median {statistics.median(delays) * 1000:6.1f} ms, "
        f"p95 {percentile(delays, 0.95) * 1000:6.1f} ms  ({len(delays)} lines)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--gets", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--lines", type=int, default=100)
    parser.add_argument("--image", default=os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm"))
    parser.add_argument(
        "--db-url",
        default=None,
        help="a PostgreSQL database for the request figures (a throwaway schema in it)",
    )
    args = parser.parse_args()
    print(f"pier API bench: {os.cpu_count()} CPUs, store {'PostgreSQL' if args.db_url else 'SQLite'}, "
          f"{args.concurrency} concurrent clients")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pier-bench-") as tmp:
        (Path(tmp) / "requests").mkdir()
        (Path(tmp) / "sse").mkdir()
        bench_requests(args, Path(tmp) / "requests")
        bench_sse(args, Path(tmp) / "sse")


if __name__ == "__main__":
    main()
