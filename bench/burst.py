"""A burst of runs through the API against raw docker doing the same work at the
same parallelism.

Submits N trivial script runs at once (`POST /api/v1/run`) to a `pier serve` with
S run slots (PIER_MAX_CONCURRENT_RUNS), waits for every one to end, and prints
runs per second (N / time until the last one ended) and the ready latency of
each run (from the burst's start to its record's `ended`: results stored) as
p50/p95. Then the same N jobs by raw docker (`docker run -d`, `docker exec`,
`docker cp` of the results, `docker rm -f`), S at a time, timed the same way.
Goal: pier's runs/s at least 0.8x raw. Needs a Docker engine and the image.

    uv run python bench/burst.py [--runs 100] [--slots 8] [--image pier-base:bookworm] [--pool 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import NORMAL_SERVER, Server, http_request, load, percentile, runbook, setup_collection

SCRIPT = 'echo "first line"\necho hello > {{results_dir}}/out.txt'


def burst_api(args: argparse.Namespace, home: Path) -> tuple[float, list[float]]:
    os.environ["PIER_MAX_CONCURRENT_RUNS"] = str(args.slots)
    if args.pool:
        os.environ["PIER_WARM_POOL"] = json.dumps([{"image": args.image, "size": args.pool}])
    server = Server(NORMAL_SERVER, home, None)
    try:
        token = setup_collection(server.url, "burst", runbook(SCRIPT, args.image))
        if args.pool:
            time.sleep(args.pool_wait)  # let the pool fill before the burst
        post = http_request("POST", "/api/v1/run/bench/burst", token, b"{}")
        began_wall = datetime.now().astimezone()
        began = time.perf_counter()
        _, _, bodies = asyncio.run(load(server.port, args.runs, min(args.runs, 32), lambda _n: post))
        ids = [json.loads(body)["trajectory_id"] for body in bodies]
        ended = wait_all(server.url, token, ids, began, args.timeout)
    finally:
        server.stop()
    latencies = [(moment - began_wall).total_seconds() for moment in ended]
    return args.runs / max(latencies), latencies


def wait_all(
    url: str, token: str, ids: list[str], began: float, timeout: float, task: str = "burst"
) -> list[datetime]:
    """Each run's `ended`, once every run has one (polled once a second)."""
    ended: dict[str, datetime] = {}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        while len(ended) < len(ids):
            if time.perf_counter() - began > timeout:
                raise SystemExit(f"only {len(ended)} of {len(ids)} runs ended in {timeout:.0f} s")
            time.sleep(1)
            for tid in (t for t in ids if t not in ended):
                record = client.get(f"/api/v1/db/trajectory/bench/{task}/{tid}").json()
                if record.get("status") in ("completed", "failed", "cancelled"):
                    if record["status"] != "completed":
                        raise SystemExit(f"run {tid} {record['status']}: {record.get('error')}")
                    ended[tid] = datetime.fromisoformat(record["ended"])
    return list(ended.values())


def raw_job(image: str, out: Path) -> None:
    cid = subprocess.check_output(
        ["docker", "run", "-d", "--init", image, "sleep", "infinity"], text=True
    ).strip()
    try:
        subprocess.run(["docker", "exec", cid, "bash", "-c", "mkdir -p /app/results && echo 'first line' "
                        "&& echo hello > /app/results/out.txt"], check=True, capture_output=True)  # fmt: skip
        subprocess.run(["docker", "cp", f"{cid}:/app/results", str(out)], check=True, capture_output=True)
    finally:
        subprocess.run(["docker", "rm", "-f", cid], check=True, capture_output=True)


def burst_raw(args: argparse.Namespace, work: Path) -> tuple[float, list[float]]:
    began = time.perf_counter()
    latencies: list[float] = []

    def job(n: int) -> None:
        raw_job(args.image, work / f"raw-{n}")
        latencies.append(time.perf_counter() - began)

    with ThreadPoolExecutor(args.slots) as pool:
        list(pool.map(job, range(args.runs)))
    return args.runs / max(latencies), latencies


def show(label: str, rate: float, latencies: list[float]) -> None:
    print(
        f"{label:<34} {rate:6.2f} runs/s   ready latency p50 {statistics.median(latencies):6.2f} s, "
        f"p95 {percentile(latencies, 0.95):6.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--image", default=os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm"))
    parser.add_argument("--pool", type=int, default=0, help="PIER_WARM_POOL size for the server (0: none)")
    parser.add_argument("--pool-wait", type=float, default=20, help="seconds to let the pool fill")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pier-burst-") as tmp:
        work = Path(tmp)
        (work / "home").mkdir()
        load_before = os.getloadavg()
        api_rate, api_latencies = burst_api(args, work / "home")
        raw_rate, raw_latencies = burst_raw(args, work)
        load_after = os.getloadavg()
    print(
        f"{args.runs} runs, {args.slots} at a time, on {args.image}"
        + (f", warm pool {args.pool}" if args.pool else "")
    )
    print(f"load average before / after: {' '.join(f'{x:.2f}' for x in load_before)} / "
          f"{' '.join(f'{x:.2f}' for x in load_after)}")  # fmt: skip
    show("raw docker (baseline)", raw_rate, raw_latencies)
    show("pier serve, POST /api/v1/run", api_rate, api_latencies)
    print(f"ratio pier / raw: {api_rate / raw_rate:.2f} (goal >= 0.8)")


if __name__ == "__main__":
    main()
