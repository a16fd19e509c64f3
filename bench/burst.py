"""A burst of runs through the API against raw docker doing the same work at the
same parallelism.

Submits N trivial script runs at once (`POST /api/v1/run`) to a `pier serve` with
S run slots (PIER_MAX_CONCURRENT_RUNS), waits for every one to end, and prints
runs per second (N / time until the last one ended) and the ready latency of
each run (from the burst's start to its record's `ended`: results stored) as
p50/p95. Then the same N jobs by raw docker (`docker run -d`, `docker exec`,
`docker cp` of the results, `docker rm -f`), S at a time, timed the same way.
Goal: pier's runs/s at least 0.9x raw. Needs a Docker engine and the image.

With --compare PYTHON (another checkout's interpreter, e.g. main's
`../main/.venv/bin/python`), a server of that checkout's pier takes the same
burst too, and --rounds N repeats the three N times (raw, then this and
compared, taking turns to go first): the machine's load moves between rounds,
so each round's ratios are taken within the round, and their medians printed.

    uv run python bench/burst.py [--runs 100] [--slots 8] [--image pier-base:bookworm] [--pool 0]
                                 [--compare ../main/.venv/bin/python] [--rounds 3]
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


def burst_api(args: argparse.Namespace, home: Path, python: str | None = None) -> tuple[float, list[float]]:
    os.environ["PIER_MAX_CONCURRENT_RUNS"] = str(args.slots)
    # The whole burst waits at once: past the default quota of 100 queued runs, it would be refused.
    os.environ["PIER_QUOTA_QUEUED_RUNS"] = str(max(args.runs, 100))
    if args.pool:
        os.environ["PIER_WARM_POOL"] = json.dumps([{"image": args.image, "size": args.pool}])
    home.mkdir()
    server = Server(NORMAL_SERVER, home, None, args.port, python=python)
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
        ["docker", "run", "-d", "--init", "--label", "pier.bench=burst", image, "sleep", "infinity"],
        text=True,
    ).strip()
    try:
        subprocess.run(["docker", "exec", cid, "bash", "-c", "mkdir -p /app/results && echo 'first line' "
                        "&& echo hello > /app/results/out.txt"], check=True, capture_output=True)  # fmt: skip
        subprocess.run(["docker", "cp", f"{cid}:/app/results", str(out)], check=True, capture_output=True)
    finally:
        subprocess.run(["docker", "rm", "-f", cid], check=True, capture_output=True)


def burst_raw(args: argparse.Namespace, work: Path) -> tuple[float, list[float]]:
    work.mkdir()
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
    parser.add_argument("--port", type=int, default=None, help="the server's port (default: a free one)")
    parser.add_argument("--compare", help="another checkout's python, whose pier serves the burst too")
    parser.add_argument("--rounds", type=int, default=1, help="times to repeat raw, this (and compared)")
    args = parser.parse_args()
    sides = {"this": None, **({"compared": args.compare} if args.compare else {})}
    rates: dict[str, list[float]] = {"raw": [], **{side: [] for side in sides}}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pier-burst-") as tmp:
        work = Path(tmp)
        for n in range(args.rounds):
            load_before = os.getloadavg()
            raw_rate, raw_latencies = burst_raw(args, work / f"raw{n}")
            show(f"round {n + 1}: raw docker", raw_rate, raw_latencies)
            rates["raw"].append(raw_rate)
            order = list(sides.items())
            for side, python in order if n % 2 == 0 else order[::-1]:  # neither always goes first
                rate, latencies = burst_api(args, work / f"home-{side}{n}", python)
                show(f"round {n + 1}: pier serve ({side})", rate, latencies)
                rates[side].append(rate)
            load_after = os.getloadavg()
            loads += [load_before[0], load_after[0]]
            print(f"  load average before / after: {' '.join(f'{x:.2f}' for x in load_before)} / "
                  f"{' '.join(f'{x:.2f}' for x in load_after)}", flush=True)  # fmt: skip
    print(
        f"{args.runs} runs, {args.slots} at a time, on {args.image}"
        + (f", warm pool {args.pool}" if args.pool else "")
        + f"; {args.rounds} round(s), 1-minute load average {min(loads):.1f}-{max(loads):.1f}"
    )
    median = statistics.median
    print(f"raw docker (baseline)              {median(rates['raw']):6.2f} runs/s (median)")
    for side in sides:
        ratios = [rate / raw for rate, raw in zip(rates[side], rates["raw"], strict=True)]
        label = "pier serve, POST /api/v1/run" + ("" if side == "this" else f" ({args.compare})")
        print(f"{label:<34} {median(rates[side]):6.2f} runs/s (median; {', '.join(f'{r:.2f}' for r in rates[side])})"
              f"   ratio pier / raw {median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip
    if args.compare:
        this_vs = [t / c for t, c in zip(rates["this"], rates["compared"], strict=True)]
        print(f"this / compared: {median(this_vs):.2f} (median of {', '.join(f'{r:.2f}' for r in this_vs)})")
    print("goal: ratio pier / raw >= 0.9")


if __name__ == "__main__":
    main()
