"""What watching pier costs: a burst's throughput with metrics scraped and
traces exported, against the same burst with neither, in the same run.

Each round starts a `pier serve` on the fake sandbox backend (no Docker, so
the figure is pier's own work: API, store, lifecycle, telemetry), posts N
trivial runs at once and times until the last one ended. "on": a scraper reads
/metrics every second and every span goes over OTLP/HTTP to a receiver in this
process (which decodes nothing: the cost measured is pier's). "off": no scraper,
no OTLP variables (tracing then costs nothing: no provider exists). Rounds
alternate off/on so drift in the machine's load hits both alike; the medians are
compared. Goal: on is less than 3 % slower.

    uv run python bench/observability.py [--runs 100] [--rounds 3] [--slots 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import contextlib

from api import ADMIN, NORMAL_SERVER, Server, http_request, load, runbook, setup_collection
from burst import wait_all

FAKE = "tests.support.fleet_backend:backend"


class Sink(ThreadingHTTPServer):
    """Takes OTLP exports and counts their bytes."""

    def __init__(self) -> None:
        self.received = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(handler) -> None:
                self.received += len(handler.rfile.read(int(handler.headers.get("content-length") or 0)))
                handler.send_response(200)
                handler.end_headers()

            def log_message(handler, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


def scrape(url: str, stop: threading.Event, counts: list[int]) -> None:
    while not stop.wait(1.0):
        with contextlib.suppress(httpx.HTTPError):
            counts.append(
                len(httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).content)
            )


def burst(runs: int, slots: int, observed: bool, sink: Sink) -> float:
    env = {
        "PIER_SANDBOX_BACKEND": FAKE,
        "PIER_MAX_CONCURRENT_RUNS": str(slots),
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        os.environ.pop(name, None)
    if observed:
        env |= {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink.server_address[1]}",
            "OTEL_BSP_SCHEDULE_DELAY": "500",
        }
    os.environ.update(env)
    with tempfile.TemporaryDirectory(prefix="pier-bench-obs-") as home:
        server = Server(NORMAL_SERVER, Path(home), None)
        stop, scraped = threading.Event(), []
        try:
            token = setup_collection(server.url, "obs", runbook("echo hi", "pier-fake:latest"))
            if observed:
                threading.Thread(target=scrape, args=(server.url, stop, scraped), daemon=True).start()
            post = http_request("POST", "/api/v1/run/bench/obs", token, b"{}")
            began_wall = datetime.now().astimezone()
            began = time.perf_counter()
            _, _, bodies = asyncio.run(load(server.port, runs, min(runs, 32), lambda _n: post))
            ids = [json.loads(body)["trajectory_id"] for body in bodies]
            ended = wait_all(server.url, token, ids, began, 600, task="obs")
            elapsed = (max(ended) - began_wall).total_seconds()
        finally:
            stop.set()
            server.stop()
    return runs / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slots", type=int, default=8)
    args = parser.parse_args()
    sink = Sink()
    off, on = [], []
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for number in range(args.rounds):
        off.append(burst(args.runs, args.slots, False, sink))
        on.append(burst(args.runs, args.slots, True, sink))
        print(f"round {number + 1}: off {off[-1]:.2f} runs/s, on {on[-1]:.2f} runs/s")
    base, watched = statistics.median(off), statistics.median(on)
    print(f"metrics + tracing off: {base:.2f} runs/s (median of {args.rounds})")
    print(f"metrics scraped + traces exported: {watched:.2f} runs/s ({sink.received} bytes of OTLP received)")
    print(f"on / off = {watched / base:.3f} ({(1 - watched / base) * 100:+.1f} % slower; goal < 3 %)")


if __name__ == "__main__":
    main()
