"""The fleet's throughput and its live-log latency.

Throughput: runs through the API with the in-process executor, then through
Temporal with 1, 2 and 3 `pier worker`s (one engine, one PostgreSQL): runs/s,
queue wait p50/p95 (accepted -> started), and the orchestration overhead per
run, Temporal vs in-process, with the fake backend.

Live-log latency: a fake agent logs --lines lines, one every --line-gap
seconds; an SSE follower measures each line from the time the emitting
process logged it (the event's own `ts`, written by that process) to the time
the follower read it (same host clock). Three figures, one run: a bare
PostgreSQL NOTIFY -> LISTEN round trip (the floor of any cross-process bus on
that database), the in-process executor with its follower on the same
server (the embedded bus), and a `pier worker`'s lines to a follower on a
`pier serve` replica (PostgreSQL LISTEN/NOTIFY bus); goal: p95 < 100 ms.

Needs PostgreSQL and Temporal's dev server (scripts/start-postgres.sh,
scripts/start-temporal.sh: export what they print); --backend docker also a
Docker engine and the base image. Keep sizes small on a shared machine.

    uv run python bench/fleet.py [--part latency|throughput|all] [--runs 20]
        [--backend fake|docker] [--slots 2] [--lines 300] [--line-gap 0.01]

The default part, latency, takes about a minute; `--part all`
prints every figure in one run (a few minutes).

Breakdown (`--part breakdown`): one worker's runs, each cut into steps from
its workflow history (a workflow task's wait for a poller and its
processing, an activity's dispatch and its run, the hops a slot waits on),
p50 / p95 / mean; `--keep-histories DIR` writes the histories as JSON (the
replay test's histories were recorded so).

    uv run python bench/fleet.py --part breakdown [--runs 20] [--keep-histories DIR]

`--compare CHECKOUT` (throughput, breakdown): the fleet runs again on that
checkout's pier (its servers and workers use CHECKOUT/.venv/bin/python), in
the same run: e.g. `--compare /work/main`. `--rounds N` measures each
configuration N times, each pair in alternating order (the load drifts).

Backlog (`--backlog`): --backlog-runs runs (200) queued, then 2 workers x
--slots slots started: runs/s from the workers' start and slot utilisation
(the share of the slots running a run, sampled from the database every 0.1 s
while runs still wait), against the same runs on the in-process executor with
as many slots (no claim step, no Temporal: the bound on what claiming a slot
costs; its time includes accepting the runs), in the same run.

    uv run python bench/fleet.py --backlog [--backlog-runs 200] [--slots 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.api_server import Server, make_collection
from tests.support.fleet import FAKE_BACKEND, Fleet, Follower, Worker

from pier.db.engine import conninfo, scratch_schema

GOAL_P95_MS = 100


def percentile(values: list[float], q: float) -> float:
    """The q-th quantile (0-1), numpy's linear interpolation."""
    return float(numpy.quantile(values, q))


def measure(server: Server, image: str, fleet: Fleet, runs: int) -> dict[str, Any]:
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
            "failed": len(bad), "ids": ids}  # fmt: skip


def polling(workers: list[Worker], timeout: float = 120) -> None:
    """Wait until each worker has started (it logs its queue as it starts
    polling): the in-process server is up before its runs are sent, and so
    are the workers; a worker's start-up is not the orchestration's cost."""
    deadline = time.monotonic() + timeout
    for worker in workers:
        while "slot(s), queue" not in (
            worker.log_path.read_text(errors="replace") if worker.log_path.exists() else ""
        ):
            if time.monotonic() > deadline or worker.proc.poll() is not None:
                sys.exit(f"worker {worker.identity} did not start: {worker.log_tail()}")
            time.sleep(0.1)


def throughput(args: argparse.Namespace, pg: str, address: str) -> None:
    image = (
        "pier-fake:latest"
        if args.backend == "fake"
        else os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm")
    )
    backend = {"PIER_SANDBOX_BACKEND": FAKE_BACKEND} if args.backend == "fake" else {}
    print(f"{args.runs} trivial runs, {args.backend} backend, {args.slots} slot(s) per executor/worker")
    print(f"{'executor':<34} {'runs/s':>7} {'wall s':>7} {'wait p50':>9} {'wait p95':>9} {'failed':>7}")
    results: dict[str, dict[str, Any]] = {}
    configs: list[tuple[str, int, Path | None]] = []
    for round_ in range(args.rounds):
        configs.append(("in-process", 0, None))
        for workers in args.workers:
            pair = [(f"temporal, {workers} worker(s)", workers, None)]
            if args.compare:
                pair.append((f"temporal, {workers} worker(s), compare", workers, args.compare))
            configs.extend(pair if round_ % 2 == 0 else pair[::-1])  # the load drifts: alternate
    for name, workers, checkout in configs:
        with scratch_fleet(pg, address, backend, checkout) as fleet:
            fleet.settings["PIER_WORKER_SLOTS"] = str(args.slots)
            if workers == 0:
                server = in_process_server(fleet, {**backend, "PIER_MAX_CONCURRENT_RUNS": str(args.slots)})
            else:
                server = fleet.server()
                started = [fleet.worker(f"bench{n + 1}") for n in range(workers)]
                polling(started)
            got = measure(server, image, fleet, args.runs)
            print(f"{name:<34} {got['runs/s']:>7.2f} {got['wall']:>7.1f} {got['p50']:>9.2f} {got['p95']:>9.2f} "
                  f"{got['failed']:>7}", flush=True)  # fmt: skip
        walls = results.setdefault(name, {"walls": []})["walls"]
        walls.append(got["wall"])
        results[name]["wall"] = statistics.median(walls)
    if args.rounds > 1:
        print(
            f"medians over {args.rounds} rounds: "
            + ", ".join(f"{n} {r['wall']:.1f} s" for n, r in results.items())
        )
    base = results["in-process"]
    for name, got in results.items():
        if name == "in-process":
            continue
        overhead = (got["wall"] - base["wall"]) / args.runs
        slots = "same slots" if name.startswith("temporal, 1 worker") else "more slots"
        print(f"orchestration overhead per run, {name} vs in-process, {slots}: {overhead * 1000:+.0f} ms"
              f" (ratio {got['wall'] / base['wall']:.2f}x)")  # fmt: skip
    if args.compare:
        for workers in args.workers:
            this, other = (
                results[f"temporal, {workers} worker(s)"],
                results[f"temporal, {workers} worker(s), compare"],
            )
            print(f"{workers} worker(s): this checkout {this['wall']:.1f} s vs {args.compare} {other['wall']:.1f} s "
                  f"(ratio {this['wall'] / other['wall']:.2f}x, {(this['wall'] - other['wall']) / args.runs * 1000:+.0f} ms per run)")  # fmt: skip
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def history_steps(address: str, ids: list[str], keep: Path | None = None) -> dict[str, list[float]]:
    """Each run's workflow history, cut into steps (seconds between events):
    a workflow task's wait for a poller (scheduled -> started) and its
    processing (started -> completed), an activity's wait (scheduled ->
    started) and its run, and the hops the slot waits on (an activity's end
    to the next one's start). `keep`: write the histories there (JSON)."""
    import asyncio

    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client

    steps: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        steps.setdefault(name, []).append(seconds)

    async def collect() -> None:
        client = await Client.connect(address)
        for tid in ids:
            history = await client.get_workflow_handle(tid).fetch_history()
            if keep is not None:
                (keep / f"{tid}.json").write_text(history.to_json())
            at: dict[int, float] = {}
            names: dict[int, str] = {}
            wft, last_end = 0, None
            for event in history.events:
                t = event.event_time.ToDatetime().timestamp()
                at[event.event_id] = t
                kind = event.event_type
                if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                    start = t
                elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                    wft += 1
                elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                    a = event.workflow_task_started_event_attributes
                    add(f"wft{wft} wait (scheduled->started)", t - at[a.scheduled_event_id])
                elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                    a = event.workflow_task_completed_event_attributes
                    add(f"wft{wft} processing (started->completed)", t - at[a.started_event_id])
                elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    names[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
                elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                    a = event.activity_task_started_event_attributes
                    name = names[a.scheduled_event_id]
                    add(f"{name} wait (scheduled->started)", t - at[a.scheduled_event_id])
                    if last_end is not None:
                        add(f"hop: previous activity's end -> {name} started", t - last_end)
                elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                    a = event.activity_task_completed_event_attributes
                    add(f"{names[a.scheduled_event_id]} run (started->completed)", t - at[a.started_event_id])
                    last_end = t
                elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                    add("hop: last activity's end -> workflow completed", t - (last_end or start))
                    add("workflow, start -> completed", t - start)

    asyncio.run(collect())
    return steps


def breakdown(args: argparse.Namespace, pg: str, address: str) -> None:
    """One worker's runs, each cut into steps from its workflow history; with
    --compare, the other checkout's too, in the same run (p50 side by side),
    --rounds times, in alternating order (the load drifts)."""
    backend = {"PIER_SANDBOX_BACKEND": FAKE_BACKEND}
    keep = Path(args.keep_histories) if args.keep_histories else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    sides: list[Path | None] = [None, args.compare] if args.compare else [None]
    walls: dict[Path | None, list[float]] = {side: [] for side in sides}
    steps: dict[Path | None, dict[str, list[float]]] = {side: {} for side in sides}
    cpu: dict[Path | None, dict[str, list[float]]] = {side: {} for side in sides}
    for round_ in range(args.rounds):
        for side in sides if round_ % 2 == 0 else sides[::-1]:
            with scratch_fleet(pg, address, backend, side) as fleet:
                fleet.settings["PIER_WORKER_SLOTS"] = str(args.slots)
                server = fleet.server()
                polling([fleet.worker("bench1")])
                pids = [server.proc.pid, fleet.workers[0].proc.pid]  # type: ignore[union-attr]
                before = [cpu_seconds(pid) for pid in pids]
                got = measure(server, "pier-fake:latest", fleet, args.runs)
                used = [cpu_seconds(pid) - was for pid, was in zip(pids, before, strict=True)]
            walls[side].append(got["wall"])
            for name, seconds in zip(("server CPU", "worker CPU"), used, strict=True):
                cpu[side].setdefault(name, []).append(seconds / args.runs)
            for name, values in history_steps(address, got["ids"], keep if side is None else None).items():
                steps[side].setdefault(name, []).extend(values)
    print(f"{args.rounds} x {args.runs} runs, 1 worker x {args.slots} slots, fake backend: wall "
          f"{' '.join(f'{w:.1f}' for w in walls[None])} s; each step's p50 / p95 / mean over the runs, ms")  # fmt: skip
    if args.compare:
        print(f"{args.compare}: wall {' '.join(f'{w:.1f}' for w in walls[args.compare])} s; "
              f"its p50 / p95 in the last columns")  # fmt: skip
    for name, values in steps[None].items():
        ms = [v * 1000 for v in values]
        line = (
            f"{name:<52} {percentile(ms, 0.5):>7.0f} {percentile(ms, 0.95):>7.0f} {sum(ms) / len(ms):>7.0f}"
        )
        other = [v * 1000 for v in steps[args.compare].get(name, [])] if args.compare else []
        if other:
            line += f" {percentile(other, 0.5):>9.0f} {percentile(other, 0.95):>7.0f}"
        print(line)
    if args.compare:  # the other checkout's steps this one has not (its activities may differ)
        for name, values in steps[args.compare].items():
            if name not in steps[None]:
                ms = [v * 1000 for v in values]
                print(f"{name:<52} {'':>23} {percentile(ms, 0.5):>9.0f} {percentile(ms, 0.95):>7.0f}")
    for name, values in cpu[None].items():
        ms = statistics.median(values) * 1000
        line = f"{name + ' ms per run (median of the rounds)':<52} {ms:>7.1f}"
        if args.compare:
            line += f" {'':>15} {statistics.median(cpu[args.compare][name]) * 1000:>9.1f}"
        print(line)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def cpu_seconds(pid: int) -> float:
    """A live process's user + system CPU time (Linux /proc): CPU spent is
    steadier than wall time on a loaded machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def scratch_fleet(pg: str, address: str, settings: dict[str, str], checkout: Path | None = None):
    """A fleet on a fresh schema and home, closed and dropped afterwards;
    `checkout`: its servers and workers run that checkout's pier (its .venv)."""
    schema = scratch_schema(pg, prefix="pier_bench")
    home = Path(tempfile.mkdtemp(prefix="pier-bench-fleet-"))
    fleet = Fleet(home=home, db_url=next(schema), address=address, settings=dict(settings))
    if checkout is not None:
        fleet.repo, fleet.python = checkout, str(checkout / ".venv" / "bin" / "python")
    try:
        yield fleet
    finally:
        fleet.close()
        next(schema, None)


def in_process_server(fleet: Fleet, settings: dict[str, str]) -> Server:
    """A `pier serve` that runs its runs itself (the embedded executor)."""
    server = Server(fleet.home, fleet.db_url, settings={
        **settings, "PYTHONPATH": fleet.env()["PYTHONPATH"]}, python=fleet.python).start()  # fmt: skip
    fleet.servers.append(server)
    return server


def backlog_figures(
    server: Server, fleet: Fleet, runs: int, slots: int, workers: int = 0
) -> dict[str, float]:
    """Queue `runs` (16 POSTs at a time), then start `workers` (none: the
    server runs them itself); runs/s from then, and the mean share of `slots`
    running while runs wait."""
    collection = make_collection(server, "pier-fake:latest", prefix="backlog")
    collection.put_task("t", "echo hi")
    began = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        ids = list(pool.map(lambda _n: collection.run("t"), range(runs)))
    if workers:
        for n in range(workers):
            fleet.worker(f"backlog{n + 1}")
        began = time.monotonic()  # the backlog is all queued: from the workers' start
    store = fleet.store()
    busy: list[float] = []
    try:
        while True:
            counts = _counts(store, ids)
            if counts.get("pending", 0) and (not workers or counts.get("running", 0) or busy):
                busy.append(min(counts.get("running", 0), slots) / slots)
            if sum(n for status, n in counts.items() if status not in ("pending", "running")) == runs:
                break
            time.sleep(0.1)
        failed = sum(1 for tid in ids if store.get_run(tid).status.value != "completed")
    finally:
        store.close()
    wall = time.monotonic() - began
    return {"runs/s": runs / wall, "wall": wall, "busy": sum(busy) / max(1, len(busy)), "failed": failed}


def _counts(store, ids: list[str]) -> dict[str, int]:
    from sqlalchemy import func, select

    from pier.db.tables import runs

    with store._read() as connection:  # one query per sample: the bench must not be the load
        rows = connection.execute(
            select(runs.c.status, func.count()).where(runs.c.trajectory_id.in_(ids)).group_by(runs.c.status)
        ).all()
    return {status: n for status, n in rows}


def backlog(args: argparse.Namespace, pg: str, address: str) -> None:
    # the whole backlog queued in one collection: past its default queue quota
    fake = {"PIER_SANDBOX_BACKEND": FAKE_BACKEND, "PIER_QUOTA_QUEUED_RUNS": str(args.backlog_runs)}
    workers, slots = 2, args.slots
    total = workers * slots
    print(f"{args.backlog_runs} runs queued at once, fake backend, {workers} workers x {slots} slots")
    print(f"{'executor':<34} {'runs/s':>7} {'wall s':>7} {'slots busy':>11} {'failed':>7}")
    results = {}
    with scratch_fleet(pg, address, fake) as fleet:
        server = in_process_server(fleet, {**fake, "PIER_MAX_CONCURRENT_RUNS": str(total)})
        results["base"] = backlog_figures(server, fleet, args.backlog_runs, total)
    with scratch_fleet(pg, address, fake) as fleet:
        fleet.settings["PIER_WORKER_SLOTS"] = str(slots)
        server = fleet.server()
        results["fleet"] = backlog_figures(server, fleet, args.backlog_runs, total, workers)
    names = {"base": f"in-process, {total} slots (no claim)", "fleet": f"temporal, {workers}x{slots} (claim)"}
    for key, got in results.items():
        print(
            f"{names[key]:<34} {got['runs/s']:>7.2f} {got['wall']:>7.1f} {got['busy']:>10.0%} {got['failed']:>7}"
        )
    base, fleet_got = results["base"], results["fleet"]
    print(f"fleet vs no-claim baseline: {fleet_got['runs/s'] / base['runs/s']:.2f}x the runs/s, "
          f"slots busy {fleet_got['busy']:.0%} vs {base['busy']:.0%}")  # fmt: skip


def notify_latency(pg: str, lines: int, gap: float) -> list[float]:
    """A bare NOTIFY -> LISTEN round trip on the database, each note carrying
    its send time: what any bus over LISTEN/NOTIFY cannot beat."""
    channel, got, ready = "pier_bench_latency", [], threading.Event()

    def listen() -> None:
        with psycopg.connect(conninfo(pg), autocommit=True) as conn:
            conn.execute(f"LISTEN {channel}")
            ready.set()
            for note in conn.notifies(timeout=30 + lines * gap, stop_after=lines):
                got.append(time.time() - float(note.payload))

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    ready.wait(30)
    with psycopg.connect(conninfo(pg), autocommit=True) as conn:
        for _ in range(lines):
            conn.execute("SELECT pg_notify(%s, %s)", (channel, repr(time.time())))
            time.sleep(gap)
    listener.join(60)
    return got


def follow_latency(fleet: Fleet, submit_to: Server, follow_on: Server) -> list[float]:
    """One run's agent lines, submitted to one server and followed on another
    (or the same): each line's delay from its event's own time to the
    follower. Lines logged before the follower connected are left out."""
    collection = make_collection(submit_to, "pier-fake:latest", prefix="bench")
    collection.put_task("t", "echo hi")
    tid = collection.run("t")
    followed = Follower(follow_on, collection.token, tid).follow()
    if followed.broken is not None or followed.end != "completed":
        sys.exit(f"the latency run ended {followed.end} ({followed.broken}): see {fleet.home}")
    assert followed.connected is not None
    return [
        s.received - s.ts for s in followed.seen if s.line.startswith("tick ") and s.ts >= followed.connected
    ]


def latency(args: argparse.Namespace, pg: str, address: str) -> None:
    agent = {"PIER_SANDBOX_BACKEND": FAKE_BACKEND, "PIER_TEST_AGENT_LINES": str(args.lines),
             "PIER_TEST_LINE_SEC": str(args.line_gap)}  # fmt: skip
    print(f"live-log latency, {args.lines} lines {args.line_gap * 1000:g} ms apart (emit -> SSE follower)")
    print(f"{'path':<44} {'lines':>6} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7}")
    figures = {"bare NOTIFY -> LISTEN (baseline)": notify_latency(pg, args.lines, args.line_gap)}
    with scratch_fleet(pg, address, agent) as fleet:
        server = in_process_server(fleet, agent)
        figures["in-process executor, same server"] = follow_latency(fleet, server, server)
    with scratch_fleet(pg, address, agent) as fleet:
        submit, replica = fleet.server(), fleet.server()
        fleet.worker("bench1")
        figures["pier worker -> follower on a replica"] = follow_latency(fleet, submit, replica)
    for name, values in figures.items():
        ms = [v * 1000 for v in values]
        print(
            f"{name:<44} {len(ms):>6} {percentile(ms, 0.5):>7.1f} {percentile(ms, 0.95):>7.1f} {max(ms):>7.1f}"
        )
    base, fleet_ms = (
        figures["bare NOTIFY -> LISTEN (baseline)"],
        figures["pier worker -> follower on a replica"],
    )
    p95 = percentile(fleet_ms, 0.95) * 1000
    print(f"worker -> replica p95 {p95:.1f} ms: {'meets' if p95 < GOAL_P95_MS else 'MISSES'} the {GOAL_P95_MS} ms goal; "
          f"p50 {percentile(fleet_ms, 0.5) / max(percentile(base, 0.5), 1e-6):.1f}x the bare NOTIFY round trip")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", choices=["all", "throughput", "latency", "breakdown"], default="latency",
        help="latency: about a minute (the default); throughput and all: a few minutes; breakdown: "
        "one worker's runs cut into steps from their workflow histories",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--backend", choices=["fake", "docker"], default="fake")
    parser.add_argument(
        "--slots", type=int, default=2, help="run slots per worker, and of the in-process server"
    )
    parser.add_argument("--lines", type=int, default=300, help="agent lines per latency run")
    parser.add_argument("--line-gap", type=float, default=0.01, help="seconds between the agent's lines")
    parser.add_argument("--backlog", action="store_true", help="the backlog figures only (a few minutes)")
    parser.add_argument("--backlog-runs", type=int, default=200)
    parser.add_argument(
        "--compare", type=Path, metavar="CHECKOUT",
        help="throughput, breakdown: also run the fleet on another checkout's pier (with its .venv), "
        "e.g. /work/main, in the same run",
    )  # fmt: skip
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="throughput, breakdown: measure each configuration this many times, the pairs in alternating "
        "order (medians of the walls; the breakdown pools the runs)",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=lambda v: [int(n) for n in v.split(",")], default=[1, 2, 3],
        help="throughput: the fleet sizes, comma-separated (1,2,3)",
    )  # fmt: skip
    parser.add_argument(
        "--keep-histories", help="--part breakdown: write the histories (JSON) in this folder"
    )
    args = parser.parse_args()
    pg, address = os.environ.get("PIER_TEST_POSTGRES_URL"), os.environ.get("PIER_TEST_TEMPORAL_ADDRESS")
    if not pg or not address:
        sys.exit(
            "export PIER_TEST_POSTGRES_URL and PIER_TEST_TEMPORAL_ADDRESS (scripts/start-*.sh print them)"
        )
    if args.backlog:
        backlog(args, pg, address)
        return
    if args.part == "breakdown":
        breakdown(args, pg, address)
        return
    if args.part in ("all", "throughput"):
        throughput(args, pg, address)
    if args.part in ("all", "latency"):
        latency(args, pg, address)


if __name__ == "__main__":
    main()
