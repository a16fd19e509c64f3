"""A burst of runs through the API against raw docker doing the same work at the
same parallelism.

Submits N trivial script runs at once (`POST /api/v1/run`) to a `pier serve` with
S run slots (PIER_MAX_CONCURRENT_RUNS), waits for every one to end, and prints
runs per second (N / time until the last one ended) and the ready latency of
each run (from the burst's start to its record's `ended`: results stored) as
p50/p95. Then the same N jobs by raw docker (`docker run -d`, `docker exec`,
`docker cp` of the results, `docker rm -f`), S at a time, timed the same way.
Goal: pier's runs/s at least 0.9x raw. Needs a Docker engine and the image.

Like for like: both sides run on one OCI runtime (--runtime, default runc; raw
docker's is the engine's default, pier's own default is runsc where the engine
has it), and pier's sandboxes have no disk limit unless --disk-limit (raw
docker has none). Each side's whole-machine CPU per run (user + system of every
process, from /proc/stat, over the burst) is printed beside its rate: it
includes whatever else the machine ran meanwhile, so read it with the load.
pier's window opens at the first POST and closes when the last run has ended:
the server's start (its imports, the store's migrations, the fence's rules and
the collection's set-up: 2.6-4.4 CPU-s on a 2-core machine, once per server) is
printed on a line of its own, as raw docker's side does not start its engine
either; the warm pool's fill (--pool) is in neither.

--slots takes a list (8,16,32): each count is a burst of its own, beside raw
docker at the same parallelism. --ungated adds a pier side whose sandbox creates
are not gated (PIER_CREATE_CONCURRENCY = the slots: every run's create goes to
the engine at once), beside the default adaptive gate (pier.lifecycle.admission).

With --compare PYTHON (another checkout's interpreter, e.g. main's
`../main/.venv/bin/python`), a server of that checkout's pier takes the same
burst too, and --rounds N repeats them N times (raw, then the pier sides
taking turns to go first): the machine's load moves between rounds, so each
round's ratios are taken within the round, and their medians printed.

    uv run python bench/burst.py [--runs 100] [--slots 8[,16,32]] [--image pier-base:bookworm] [--pool 0]
                                 [--runtime runc] [--disk-limit 10G] [--ungated]
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import NORMAL_SERVER, Server, http_request, load, percentile, runbook, setup_collection

SCRIPT = 'echo "first line"\necho hello > {{results_dir}}/out.txt'


def machine_cpu() -> float:
    """CPU seconds the whole machine has spent busy (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    busy = fields[0] + fields[1] + fields[2] + sum(fields[5:8])
    return busy / os.sysconf("SC_CLK_TCK")


def burst_api(
    args: argparse.Namespace, home: Path, python: str | None = None, gated: bool = True
) -> tuple[float, list[float], float]:
    """(runs/s, ready latencies, machine CPU seconds from the first POST until the
    last run ended). The server's start and the collection's set-up are printed
    on their own line, not counted; the pool's fill is in neither."""
    os.environ["PIER_MAX_CONCURRENT_RUNS"] = str(args.slots)
    os.environ["PIER_SANDBOX_RUNTIME"] = args.runtime
    os.environ["PIER_DISK_LIMIT"] = args.disk_limit
    if gated:
        os.environ.pop("PIER_CREATE_CONCURRENCY", None)
    else:
        os.environ["PIER_CREATE_CONCURRENCY"] = str(args.slots)
    # The whole burst waits at once: past the default quota of 100 queued runs, it would be refused.
    os.environ["PIER_QUOTA_QUEUED_RUNS"] = str(max(args.runs, 100))
    if args.pool:
        os.environ["PIER_WARM_POOL"] = json.dumps([{"image": args.image, "size": args.pool}])
    home.mkdir()
    cpu = {"start": machine_cpu()}
    server = Server(NORMAL_SERVER, home, None, args.port, python=python)
    try:
        token = setup_collection(server.url, "burst", runbook(SCRIPT, args.image))
        print(f"  (the server's start and set-up: {machine_cpu() - cpu['start']:.2f} CPU-s, not counted)")
        if args.pool:
            time.sleep(args.pool_wait)  # let the pool fill before the burst
        post = http_request("POST", "/api/v1/run/bench/burst", token, b"{}")
        began_wall = datetime.now().astimezone()
        began = time.perf_counter()
        cpu["burst"] = machine_cpu()
        _, _, bodies = asyncio.run(load(server.port, args.runs, min(args.runs, 32), lambda _n: post))
        ids = [json.loads(body)["trajectory_id"] for body in bodies]
        ended = wait_all(
            server.url, token, ids, began, args.timeout, on_all_ended=lambda: cpu.update(end=machine_cpu())
        )
    finally:
        server.stop()
    latencies = [(moment - began_wall).total_seconds() for moment in ended]
    return args.runs / max(latencies), latencies, cpu["end"] - cpu["burst"]


def wait_all(
    url: str,
    token: str,
    ids: list[str],
    began: float,
    timeout: float,
    task: str = "burst",
    on_all_ended: Callable[[], None] = lambda: None,
) -> list[datetime]:
    """Each run's `ended`, once every run has one. While they run it asks once
    a second how many have ended (one count, `GET /api/v1/runs?status=...&limit=1`:
    the bench's own polling is load on the server that raw docker's side does not
    have, so it is one small request a second, not one per unfinished run), then
    reads each record once."""
    ended_states = [("status", s) for s in ("completed", "failed", "cancelled")]
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        while True:
            if time.perf_counter() - began > timeout:
                raise SystemExit(f"not every one of {len(ids)} runs ended in {timeout:.0f} s")
            page = client.get(
                "/api/v1/runs", params=[("collection", "bench"), ("task", task), *ended_states, ("limit", 1)]
            ).json()
            if page["total"] >= len(ids):
                on_all_ended()
                break
            time.sleep(1)
        ended: list[datetime] = []
        for tid in ids:
            record = client.get(f"/api/v1/db/trajectory/bench/{task}/{tid}").json()
            if record["status"] != "completed":
                raise SystemExit(f"run {tid} {record['status']}: {record.get('error')}")
            ended.append(datetime.fromisoformat(record["ended"]))
    return ended


def raw_job(image: str, out: Path, runtime: str = "runc") -> None:
    cid = subprocess.check_output(
        [
            "docker",
            "run",
            "-d",
            "--init",
            "--runtime",
            runtime,
            "--label",
            "pier.bench=burst",
            image,
            "sleep",
            "infinity",
        ],
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
        raw_job(args.image, work / f"raw-{n}", args.runtime)
        latencies.append(time.perf_counter() - began)

    with ThreadPoolExecutor(args.slots) as pool:
        list(pool.map(job, range(args.runs)))
    return args.runs / max(latencies), latencies


def show(label: str, rate: float, latencies: list[float], cpu: float, runs: int) -> None:
    print(
        f"{label:<40} {rate:6.2f} runs/s   ready latency p50 {statistics.median(latencies):6.2f} s, "
        f"p95 {percentile(latencies, 0.95):6.2f} s   machine CPU {cpu / runs:5.2f} s/run",
        flush=True,
    )


def measured(burst: Callable[[], tuple[float, list[float]]]) -> tuple[float, list[float], float]:
    """(runs/s, latencies, machine CPU seconds) of one burst."""
    before = machine_cpu()
    rate, latencies = burst()
    return rate, latencies, machine_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--slots", default="8", help="run slots, or a comma-separated list of them (8,16,32)")
    parser.add_argument("--image", default=os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm"))
    parser.add_argument("--pool", type=int, default=0, help="PIER_WARM_POOL size for the server (0: none)")
    parser.add_argument("--pool-wait", type=float, default=20, help="seconds to let the pool fill")
    parser.add_argument("--runtime", default="runc", help="the OCI runtime of both sides (runc, runsc)")
    parser.add_argument(
        "--disk-limit", default="", help="pier's PIER_DISK_LIMIT (default none, as raw docker)"
    )
    parser.add_argument("--ungated", action="store_true", help="add a pier side with its create gate off")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--port", type=int, default=None, help="the server's port (default: a free one)")
    parser.add_argument("--compare", help="another checkout's python, whose pier serves the burst too")
    parser.add_argument("--rounds", type=int, default=1, help="times to repeat raw, this (and compared)")
    args = parser.parse_args()
    sides: dict[str, tuple[str | None, bool]] = {"this": (None, True)}
    if args.ungated:
        sides["this, ungated"] = (None, False)
    if args.compare:
        sides["compared"] = (args.compare, True)
    median = statistics.median
    with tempfile.TemporaryDirectory(prefix="pier-burst-") as tmp:
        work = Path(tmp)
        for slots in [int(x) for x in str(args.slots).split(",")]:
            args.slots = slots
            rates: dict[str, list[float]] = {"raw": [], **{side: [] for side in sides}}
            cpus: dict[str, list[float]] = {"raw": [], **{side: [] for side in sides}}
            loads: list[float] = []
            for n in range(args.rounds):
                load_before = os.getloadavg()
                raw_work = work / f"raw{slots}-{n}"
                rate, latencies, cpu = measured(lambda: burst_raw(args, raw_work))  # noqa: B023
                show(f"{slots} slots, round {n + 1}: raw docker", rate, latencies, cpu, args.runs)
                rates["raw"].append(rate)
                cpus["raw"].append(cpu / args.runs)
                order = list(sides.items())
                shift = n % len(order)
                for side, (python, gated) in order[shift:] + order[:shift]:  # none always goes first
                    home = work / f"home-{side.replace(', ', '-')}{slots}-{n}"
                    rate, latencies, cpu = burst_api(args, home, python, gated)
                    show(
                        f"{slots} slots, round {n + 1}: pier serve ({side})", rate, latencies, cpu, args.runs
                    )
                    rates[side].append(rate)
                    cpus[side].append(cpu / args.runs)
                load_after = os.getloadavg()
                loads += [load_before[0], load_after[0]]
                print(f"  load average before / after: {' '.join(f'{x:.2f}' for x in load_before)} / "
                      f"{' '.join(f'{x:.2f}' for x in load_after)}", flush=True)  # fmt: skip
            print(
                f"== {args.runs} runs, {slots} at a time, on {args.image}, runtime {args.runtime}, pier's disk "
                f"limit {args.disk_limit or 'none'}"
                + (f", warm pool {args.pool}" if args.pool else "")
                + f"; {args.rounds} round(s), 1-minute load average {min(loads):.1f}-{max(loads):.1f}"
            )
            print(f"raw docker (baseline)                    {median(rates['raw']):6.2f} runs/s (median)   "
                  f"machine CPU {median(cpus['raw']):.2f} s/run")  # fmt: skip
            for side in sides:
                ratios = [rate / raw for rate, raw in zip(rates[side], rates["raw"], strict=True)]
                label = f"pier serve ({side})" if side != "compared" else f"pier serve ({args.compare})"
                print(f"{label:<40} {median(rates[side]):6.2f} runs/s (median; "
                      f"{', '.join(f'{r:.2f}' for r in rates[side])})   ratio pier / raw {median(ratios):.2f} "
                      f"({', '.join(f'{r:.2f}' for r in ratios)})   machine CPU {median(cpus[side]):.2f} s/run "
                      f"(raw + {median(cpus[side]) - median(cpus['raw']):.2f})")  # fmt: skip
            if args.compare:
                this_vs = [t / c for t, c in zip(rates["this"], rates["compared"], strict=True)]
                print(
                    f"this / compared: {median(this_vs):.2f} (median of {', '.join(f'{r:.2f}' for r in this_vs)})"
                )
    print("goals: ratio pier / raw >= 0.9; machine CPU per run <= raw + 0.2 s")


if __name__ == "__main__":
    main()
