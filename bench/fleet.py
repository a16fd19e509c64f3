"""The fleet's throughput: runs through the API with the in-process executor,
then through Temporal with 1, 2 and 3 `pier worker`s (one engine, one
PostgreSQL): runs/s, queue wait p50/p95 (accepted -> started), and the
orchestration overhead per run, Temporal vs in-process, with the fake backend.

Needs PostgreSQL and Temporal's dev server (scripts/start-postgres.sh,
scripts/start-temporal.sh: export what they print); --backend docker also a
Docker engine and the base image. Keep sizes small on a shared machine.

    uv run python bench/fleet.py [--runs 20] [--backend fake|docker] [--slots 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.api_server import Server, make_collection
from tests.support.fleet import FAKE_BACKEND, Fleet

from pier.db.engine import scratch_schema


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(server: Server, image: str, fleet: Fleet, runs: int) -> dict[str, float]:
    collection = make_collection(server, image, prefix="bench")
    collection.put_task("t", "mkdir -p /app/results && echo ok > /app/results/out.txt")
    began = time.monotonic()
    ids = [collection.run("t") for _ in range(runs)]
    store = fleet.store()
    try:
        while True:
            records = [store.get_run(tid) for tid in ids]
            if all(r.status.terminal for r in records):
                break
            time.sleep(0.2)
    finally:
        store.close()
    wall = time.monotonic() - began
    bad = [r.error for r in records if r.status.value != "completed"]
    waits = [(r.started - r.created).total_seconds() for r in records if r.started]
    return {"runs/s": runs / wall, "wall": wall, "p50": percentile(waits, 0.5), "p95": percentile(waits, 0.95),
            "failed": len(bad)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--backend", choices=["fake", "docker"], default="fake")
    parser.add_argument(
        "--slots", type=int, default=2, help="run slots per worker, and of the in-process server"
    )
    args = parser.parse_args()
    pg, address = os.environ.get("PIER_TEST_POSTGRES_URL"), os.environ.get("PIER_TEST_TEMPORAL_ADDRESS")
    if not pg or not address:
        sys.exit(
            "export PIER_TEST_POSTGRES_URL and PIER_TEST_TEMPORAL_ADDRESS (scripts/start-*.sh print them)"
        )
    image = (
        "pier-fake:latest"
        if args.backend == "fake"
        else os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm")
    )
    backend = {"PIER_SANDBOX_BACKEND": FAKE_BACKEND} if args.backend == "fake" else {}
    print(f"{args.runs} trivial runs, {args.backend} backend, {args.slots} slot(s) per executor/worker")
    print(f"{'executor':<22} {'runs/s':>7} {'wall s':>7} {'wait p50':>9} {'wait p95':>9} {'failed':>7}")
    results = {}
    for workers in (0, 1, 2, 3):
        schema = scratch_schema(pg, prefix="pier_bench")
        home = Path(tempfile.mkdtemp(prefix="pier-bench-fleet-"))
        fleet = Fleet(home=home, db_url=next(schema), address=address, settings=dict(backend))
        fleet.settings["PIER_WORKER_SLOTS"] = str(args.slots)
        try:
            if workers == 0:
                server = Server(home, fleet.db_url, settings={
                    **backend, "PIER_MAX_CONCURRENT_RUNS": str(args.slots),
                    "PYTHONPATH": fleet.env()["PYTHONPATH"]}).start()  # fmt: skip
                fleet.servers.append(server)
                name = "in-process"
            else:
                server = fleet.server()
                for n in range(workers):
                    fleet.worker(f"bench{n + 1}")
                name = f"temporal, {workers} worker(s)"
            got = results[name] = measure(server, image, fleet, args.runs)
            print(f"{name:<22} {got['runs/s']:>7.2f} {got['wall']:>7.1f} {got['p50']:>9.2f} {got['p95']:>9.2f} "
                  f"{got['failed']:>7}", flush=True)  # fmt: skip
        finally:
            fleet.close()
            next(schema, None)
    base, one = results["in-process"], results["temporal, 1 worker(s)"]
    overhead = (one["wall"] - base["wall"]) / args.runs
    print(f"orchestration overhead per run, Temporal (1 worker) vs in-process, same slots: {overhead * 1000:+.0f} ms"
          f" (ratio {one['wall'] / base['wall']:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
