"""N sandboxes created at once (default 100): create -> first command, p50/p99 and
success rate, for pier with its warm pool, pier without it, and raw Docker, in
one run.

Each side starts N threads at one barrier; each thread makes a sandbox and runs
`true` in it, and its figure is the time from the barrier to `true`'s answer (a
failure, or no answer within --timeout, counts against the success rate). Then
the side's sandboxes are removed (untimed) before the next side starts.

- raw docker: the engine's API as the docker CLI drives it (create, start, exec
  create, exec start, exec inspect), through one docker SDK client.
- pier: `DockerBackend.create` (pier's plan, hardening, labels, the disk guard
  when --disk-limit is set) then `Sandbox.exec`, the calls a run makes.
- pier, create gate: the same, each create through the adaptive gate every run's
  create passes (`pier.lifecycle.admission`, as PIER_CREATE_CONCURRENCY=0 does):
  at most as many creates at the engine as it takes without queueing.
- pier, warm pool: a `WarmPool` of N filled first (untimed: a server fills it
  ahead of runs), then N claims at once and `true` in each claimed sandbox.

Both sides use the same OCI runtime (--runtime, default runc) and the same
image; pier's sandboxes get no disk limit unless --disk-limit (raw docker has
none). --rounds repeats the three sides, rotating which goes first (the
machine's load moves), and prints each side's figures per round and their
medians. Every container made here has the label pier.bench=creates.

    uv run python bench/creates.py [--creates 100] [--rounds 1] [--runtime runc] [--sides raw,pier,gated,pool]
                                   [--disk-limit 10G] [--image pier-base:bookworm]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import numpy

from pier.lifecycle.admission import FLOOR_PER_CPU, CreateGate
from pier.lifecycle.pool import PoolKey, WarmPool
from pier.sandbox.base import LABEL_RUN, Limits, Sandbox, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import Settings

LABELS = {"pier.bench": "creates"}


def percentile(values: list[float], q: float) -> float:
    """The q-th quantile (0-1), numpy's linear interpolation."""
    return float(numpy.quantile(values, q))


def burst(n: int, make: Callable[[], object], first: Callable[[object], None], timeout: float) -> dict:
    """N threads released together: make() then first(made); their times and what they made."""
    gate = threading.Barrier(n + 1)
    times: list[float] = []
    made: list[object] = []
    errors: list[str] = []
    lock = threading.Lock()
    began = [0.0]

    def one() -> None:
        gate.wait()
        try:
            thing = make()
            with lock:
                made.append(thing)
            first(thing)
            elapsed = time.perf_counter() - began[0]
            with lock:
                (times if elapsed <= timeout else errors).append(elapsed if elapsed <= timeout else "late")
        except Exception as exc:
            with lock:
                errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for thread in threads:
        thread.start()
    began[0] = time.perf_counter()
    gate.wait()
    for thread in threads:
        thread.join(timeout + 60)
    return {"times": times, "made": made, "errors": errors}


class BenchPool(WarmPool):
    """The warm pool, its sandboxes labelled as this bench's."""

    def _spec(self, key: PoolKey) -> SandboxSpec:
        spec = super()._spec(key)
        return SandboxSpec(image=spec.image, limits=spec.limits, labels={**spec.labels, **LABELS})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--runtime", default="runc")
    parser.add_argument("--disk-limit", default="", help="pier's disk limit (default none, as raw docker)")
    parser.add_argument("--image", default=os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm"))
    parser.add_argument("--timeout", type=float, default=300, help="a create -> first command past it fails")
    parser.add_argument("--sides", default="raw,pier,gated,pool", help="which sides, comma-separated")
    args = parser.parse_args()
    n = args.creates
    home = Path(tempfile.mkdtemp(prefix="pier-bench-creates-"))
    settings = Settings(
        home=home, sandbox_runtime=args.runtime, disk_limit=args.disk_limit, base_image=args.image
    )
    backend = DockerBackend(settings)
    client = docker.APIClient(base_url=os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
                              max_pool_size=n + 4, timeout=args.timeout)  # fmt: skip
    limits = Limits(cpus=1.0, memory="1G", pids=settings.pids_limit, disk=args.disk_limit or None)

    def raw_make() -> str:
        host = client.create_host_config(init=True, runtime=args.runtime)
        cid = client.create_container(
            args.image, ["sleep", "infinity"], host_config=host, labels=LABELS, working_dir="/"
        )["Id"]
        client.start(cid)
        return cid

    def raw_first(cid: object) -> None:
        exec_id = client.exec_create(str(cid), ["true"])["Id"]
        client.exec_start(exec_id)
        code = client.exec_inspect(exec_id)["ExitCode"]
        if code != 0:
            raise RuntimeError(f"true exited {code}")

    def raw_remove(cid: object) -> None:
        client.remove_container(str(cid), force=True)

    def pier_make() -> Sandbox:
        labels = {LABEL_RUN: f"bench-creates-{time.time_ns()}", **LABELS}
        return backend.create(SandboxSpec(image=args.image, limits=limits, labels=labels))

    gate = CreateGate(ceiling=n, start=FLOOR_PER_CPU * (os.cpu_count() or 1))

    def gated_make() -> Sandbox:
        with gate.admitted():
            return pier_make()

    def pier_first(sandbox: object) -> None:
        assert isinstance(sandbox, Sandbox)
        result = sandbox.exec("true", timeout=args.timeout, workdir="/")
        if not result.ok:
            raise RuntimeError(f"true failed: {result.output[-200:]}")

    def pier_remove(sandbox: object) -> None:
        assert isinstance(sandbox, Sandbox)
        sandbox.delete()

    def pool_side() -> dict:
        pool = BenchPool(backend, settings)
        key = PoolKey(args.image, limits)
        pool._wanted = {key: n}
        began = time.perf_counter()
        with ThreadPoolExecutor(8) as fillers:  # untimed: a server fills its pool ahead of runs
            made = list(fillers.map(lambda _: pool.backend.create(pool._spec(key)), range(n)))
        pool._idle[key] = made
        print(f"  (warm pool of {n} filled in {time.perf_counter() - began:.1f} s, 8 at a time)", flush=True)
        spec = SandboxSpec(image=args.image, limits=limits, labels={})

        def claim() -> Sandbox:
            sandbox = pool.claim(spec)
            if sandbox is None:
                raise RuntimeError("no pool sandbox left")
            return sandbox

        result: dict | None = None
        try:
            result = burst(n, claim, pier_first, args.timeout)
        finally:
            left = [s for idle in pool._idle.values() for s in idle]
            pool._idle.clear()
            if result is None:  # the burst broke: nothing of the pool stays
                for sandbox in left:
                    sandbox.delete()
        result["made"] += left
        return result

    sides: dict[str, Callable[[], dict]] = {
        "raw": lambda: burst(n, raw_make, raw_first, args.timeout),
        "pier": lambda: burst(n, pier_make, pier_first, args.timeout),
        "gated": lambda: burst(n, gated_make, pier_first, args.timeout),
        "pool": pool_side,
    }
    removers = {"raw": raw_remove, "pier": pier_remove, "gated": pier_remove, "pool": pier_remove}
    labels = {
        "raw": "raw docker",
        "pier": "pier, no warm pool",
        "gated": "pier, create gate",
        "pool": "pier, warm pool",
    }
    chosen = [side for side in args.sides.split(",") if side in sides]
    figures: dict[str, list[tuple[float, float, float]]] = {side: [] for side in chosen}
    loads: list[float] = []
    print(f"{n} creates at once, {args.runtime}, {args.image}, pier's disk limit {args.disk_limit or 'none'}")
    for round_ in range(args.rounds):
        order = chosen[round_ % len(chosen) :] + chosen[: round_ % len(chosen)]
        for side in order:
            loads.append(os.getloadavg()[0])
            result = sides[side]()
            with ThreadPoolExecutor(8) as removing:
                list(removing.map(removers[side], result["made"]))
            times, errors = result["times"], result["errors"]
            rate = len(times) / n
            p50 = statistics.median(times) if times else float("nan")
            p99 = percentile(times, 0.99) if times else float("nan")
            figures[side].append((p50, p99, rate))
            print(f"round {round_ + 1}: {labels[side]:<20} p50 {p50 * 1000:7.0f} ms  p99 {p99 * 1000:7.0f} ms  "
                  f"success {rate * 100:5.1f} %  (load {loads[-1]:.1f})", flush=True)  # fmt: skip
            for error in sorted(set(map(str, errors)))[:3]:
                print(f"    failed: {error}")
    print(f"medians over {args.rounds} round(s), 1-minute load average {min(loads):.1f}-{max(loads):.1f}:")
    med = statistics.median
    raw = figures.get("raw")
    for side in chosen:
        p50, p99 = med(f[0] for f in figures[side]), med(f[1] for f in figures[side])
        rate = med(f[2] for f in figures[side])
        ratio = ""
        if raw and side != "raw":
            ratio = (
                f"  p50 {p50 / med(f[0] for f in raw):.2f}x raw, p99 {p99 / med(f[1] for f in raw):.2f}x raw"
            )
        print(f"  {labels[side]:<20} p50 {p50 * 1000:7.0f} ms  p99 {p99 * 1000:7.0f} ms  "
              f"success {rate * 100:5.1f} %{ratio}")  # fmt: skip


if __name__ == "__main__":
    main()
