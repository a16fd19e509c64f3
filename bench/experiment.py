"""An experiment's scheduling overhead per run, against the same runs posted
one by one, in the same run of this script on the same server.

A `pier serve` (in-process executor, SQLite, the fake backend in its rated
mode: runs do no work, so what is timed is pier's own) with S run slots:

1. baseline: N runs of a stored task posted one after another
   (`POST /api/v1/run`), as a user's script around the API would, then waited
   for until every one has ended;
2. experiment: one experiment of the same task, N attempts, concurrency S,
   waited for until it has completed.

Prints both wall times, the time per run of each, the experiment's overhead
per run ((experiment - baseline) / N) and the ratio experiment / baseline.

    uv run python bench/experiment.py [--runs 200] [--slots 8] [--poll 1.0]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import NORMAL_SERVER, Server, setup_collection

RUNBOOK = '---\nagent: script\nsnapshot: ""\nimage: pier-fake:latest\n---\n# bench\n\n```bash\necho pier-fake-success-rate=1\n```\n'


def ended_count(client: httpx.Client, label: str | None = None) -> int:
    """How many of the bench task's runs have ended: one cheap count, the same
    query for both phases (a results read would cost the server more)."""
    params: dict[str, object] = {"collection": "bench", "task": "bench", "limit": 1,
                                 "status": ["completed", "failed", "cancelled"]}  # fmt: skip
    if label:
        params["label"] = label
    r = client.get("/api/v1/runs", params=params)
    r.raise_for_status()
    return int(r.json()["total"])


def wait_ended(client: httpx.Client, runs: int, timeout: float, label: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while ended_count(client, label) < runs:
        if time.monotonic() > deadline:
            raise SystemExit(f"not every run ended in {timeout:.0f} s")
        time.sleep(0.2)


def baseline(client: httpx.Client, runs: int, timeout: float) -> float:
    began = time.perf_counter()
    for _ in range(runs):
        client.post("/api/v1/run/bench/bench", json={}).raise_for_status()
    wait_ended(client, runs, timeout)
    return time.perf_counter() - began


def experiment(client: httpx.Client, runs: int, slots: int, timeout: float) -> float:
    began = time.perf_counter()
    r = client.post("/api/v1/experiments/bench", json={"name": "bench", "task": "bench", "attempts": runs,
                                                       "concurrency": slots})  # fmt: skip
    r.raise_for_status()
    experiment_id = r.json()["id"]
    wait_ended(client, runs, timeout, label=f"pier.experiment={experiment_id}")
    elapsed = time.perf_counter() - began
    found = client.get(f"/api/v1/experiments/bench/{experiment_id}").json()
    total = found["results"]["total"]
    if total["attempts"] != runs or found["results"]["runs_started"] != runs:
        raise SystemExit(f"the experiment ended with {total['attempts']} of {runs} attempts")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument(
        "--slots", type=int, default=8, help="PIER_MAX_CONCURRENT_RUNS and the experiment's concurrency"
    )
    parser.add_argument("--poll", type=float, default=1.0, help="PIER_EXPERIMENT_POLL_SEC (the default is 1)")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    os.environ.update({"PIER_SANDBOX_BACKEND": "fake-rated", "PIER_MAX_CONCURRENT_RUNS": str(args.slots),
                       "PIER_EXPERIMENT_POLL_SEC": str(args.poll)})  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="pier-bench-experiment-") as tmp:
        server = Server(NORMAL_SERVER, Path(tmp), None)
        try:
            token = setup_collection(server.url, "bench", RUNBOOK)
            with httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
            ) as c:
                posted = baseline(c, args.runs, args.timeout)
                scheduled = experiment(c, args.runs, args.slots, args.timeout)
        finally:
            server.stop()
    n = args.runs
    print(f"{n} runs, {args.slots} slots, experiment poll {args.poll:g} s (fake backend: runs do no work)")
    print(f"  posted one by one: {posted:7.1f} s  {posted / n * 1000:7.1f} ms/run")
    print(f"  one experiment:    {scheduled:7.1f} s  {scheduled / n * 1000:7.1f} ms/run")
    print(f"  experiment overhead per run: {(scheduled - posted) / n * 1000:+.1f} ms; "
          f"experiment / posted = {scheduled / posted:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
