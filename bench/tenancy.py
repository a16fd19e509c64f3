"""What one collection sees of another's abuse, on one real `pier serve` (the
fake sandbox backend: the engine is not the point): the well-behaved
collection's API latency (p50/p95 of GET /api/v1/tasks/<name>), the wait for
its run to start and its webhook's delay after the run ended, first with the
server to itself, then while an abusive collection floods it (runs up to its
queue quota, 400 live log streams, webhooks to a receiver that never answers,
uploads past its quota), in the same run.

    uv run python bench/tenancy.py [--runs 5] [--agent-sec 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.tenancy.conftest import start_server
from tests.support.api_server import Collection, Server, make_collection
from tests.support.tenancy import (
    CountingReceiver,
    HangingReceiver,
    ended_at,
    flood_runs,
    latencies_ms,
    open_streams,
    p50_p95,
    start_wait_sec,
)


def measure(good: Collection, runs: int) -> dict[str, float]:
    p50, p95 = p50_p95(latencies_ms(good, 100))
    receiver = CountingReceiver().start()
    waits, delays = [], []
    try:
        for _ in range(runs):
            tid = good.run("t", init_params={"webhook_url": receiver.url})
            record = good.wait("t", tid, timeout=120)
            waits.append(start_wait_sec(record))
            deadline = time.monotonic() + 30
            while (
                not any(d.delivery_id == f"msg_{tid}" for d in receiver.got) and time.monotonic() < deadline
            ):
                time.sleep(0.05)
            got = [d.at for d in receiver.got if d.delivery_id == f"msg_{tid}"]
            delays.append(got[0] - ended_at(record) if got else float("inf"))
    finally:
        receiver.stop()
    return {
        "p50_ms": p50,
        "p95_ms": p95,
        "start_wait_s": statistics.median(waits),
        "webhook_delay_s": statistics.median(delays),
    }


def abuse(server: Server, abuser: Collection, hanging: HangingReceiver) -> list:
    answers = flood_runs(abuser, "t", 200, init_params={"webhook_url": hanging.url})
    accepted = [r for r in answers if r.status_code == 200]
    refused = sum(1 for r in answers if r.status_code == 429)
    last = accepted[-1].json()["trajectory_id"]
    held, statuses = open_streams(server, abuser.token, last, 400)
    with abuser.client() as c:
        uploads = [
            c.post("/api/v1/sandbox/upload", files={"files": ("a.bin", b"a" * (2 << 20))}) for _ in range(3)
        ]
    print(
        f"abuser: {len(accepted)} runs accepted, {refused} refused 429; {len(held)} streams held, "
        f"{statuses.count(b'HTTP/1.1 429 Too Many Requests')} refused 429; uploads "
        f"{[u.status_code for u in uploads]}"
    )
    return held


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="the well-behaved collection's runs per phase")
    parser.add_argument("--agent-sec", type=float, default=1.0, help="how long each fake run's agent takes")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="pier-bench-tenancy-"))
    server = start_server(
        home,
        PIER_MAX_CONCURRENT_RUNS="2",
        PIER_TEST_AGENT_SEC=str(args.agent_sec),
        PIER_QUOTA_QUEUED_RUNS="40",
        PIER_QUOTA_UPLOAD_BYTES=str(3 << 20),
        PIER_WEBHOOK_ATTEMPT_TIMEOUT_SEC="5",
    )
    hanging = HangingReceiver()
    held = []
    try:
        good = make_collection(server, "pier-fake:latest", prefix="good")
        abuser = make_collection(server, "pier-fake:latest", prefix="abuser")
        for collection in (good, abuser):
            collection.put_task("t", "echo hi")
        alone = measure(good, args.runs)
        held = abuse(server, abuser, hanging)
        crowded = measure(good, args.runs)
    finally:
        for sock in held:
            sock.close()
        hanging.stop()
        server.stop()
    print(f"{'figure':<18}{'alone':>10}{'abused':>10}{'ratio':>8}")
    for key in alone:
        ratio = crowded[key] / alone[key] if alone[key] else float("nan")
        print(f"{key:<18}{alone[key]:>10.3f}{crowded[key]:>10.3f}{ratio:>8.2f}")
    print(f"one slot's wait (a run's agent): {args.agent_sec:.1f}s")


if __name__ == "__main__":
    main()
