"""What gVisor (runsc) costs against the engine's default runtime (runc), and what
the disk guard costs per sandbox, all measured in the same run on the same image.

Per runtime, the median of --runs of: create -> first command (a sandbox made,
`true` run in it), a trivial run (the whole lifecycle of a script runbook that
writes one result), a CPU-bound job (Python arithmetic) and a file-heavy job
(2,000 small files written, read and removed); then runsc / runc for each. Then,
on runc, create -> first command -> delete with the disk guard (the sandbox's
writable layer on a loop-mounted file of the limit's size) taking a spare disk
(formatted ahead of time, PIER_DISK_GUARD_SPARES), the same as before (the
`mount` tool and an inspect, the baseline), with the guard formatting its own
(spares 0), and without (no disk limit), interleaved, and their differences:
the guard's cost per run, and its own step in create timed. Needs a Docker engine with runsc registered
(docs/runtime.md), root, and the image.

    uv run python bench/runtime.py [--runs 5] [--image pier-base:bookworm] [--part all|guard|runsc]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pier.lifecycle.start import RunRequest, Services, run
from pier.record import RunStatus
from pier.runbook import parse
from pier.sandbox.base import LABEL_RUN, Limits, Sandbox, SandboxSpec
from pier.sandbox.docker import diskguard
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import Settings
from pier.tasks import task_from_runbook

RUNBOOK = '---\nagent: script\nsnapshot: ""\n---\n```bash\necho hello > {{results_dir}}/out.txt\n```\n'
CPU_JOB = "python3 -c 'sum(i * i for i in range(3_000_000))'"
FILE_JOB = "mkdir -p f && for i in $(seq 2000); do echo $i > f/$i; done && cat f/* > /dev/null && rm -r f"
RUNTIMES = ("runc", "runsc")


def median(fn: Callable[[], float], runs: int) -> float:
    return statistics.median(fn() for _ in range(runs))


def timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def spec(image: str, disk: str | None) -> SandboxSpec:
    limits = Limits(cpus=1.0, memory="1G", disk=disk)
    labels = {LABEL_RUN: f"bench-runtime-{time.time_ns()}", "pier.bench": "runtime"}
    return SandboxSpec(image=image, limits=limits, labels=labels)


def first_command(backend: DockerBackend, image: str, disk: str | None = None) -> float:
    """create -> `true` answered -> delete, timed to the answer (delete after)."""
    sandbox: Sandbox | None = None
    began = time.perf_counter()
    try:
        sandbox = backend.create(spec(image, disk))
        assert sandbox.exec("true", timeout=60).ok
        return time.perf_counter() - began
    finally:
        if sandbox is not None:
            sandbox.delete()


def with_delete(backend: DockerBackend, image: str, disk: str | None) -> float:
    """create -> `true` -> delete, all of it (the guard also costs at delete)."""
    began = time.perf_counter()
    sandbox = backend.create(spec(image, disk))
    try:
        assert sandbox.exec("true", timeout=60).ok
    finally:
        sandbox.delete()
    return time.perf_counter() - began


def job(backend: DockerBackend, image: str, command: str, runs: int) -> float:
    sandbox = backend.create(spec(image, None))
    try:
        return median(lambda: timed(lambda: _ok(sandbox.exec(command, timeout=300))), runs)
    finally:
        sandbox.delete()


def _ok(result: object) -> None:
    assert getattr(result, "ok", False), result


def trivial_run(settings: Settings) -> float:
    services = Services(settings)
    task = task_from_runbook(parse(RUNBOOK))

    def once() -> None:
        record = run(services, RunRequest(collection="bench", task_name="runtime", task=task))
        assert record.status == RunStatus.completed, record.error

    return timed(once)


def measure(settings: Settings, image: str, runs: int) -> dict[str, float]:
    backend = DockerBackend(settings)
    return {
        "create -> first command": median(lambda: first_command(backend, image), runs),
        "trivial run": median(lambda: trivial_run(settings), runs),
        "CPU-bound job": job(backend, image, CPU_JOB, runs),
        "file-heavy job": job(backend, image, FILE_JOB, runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--image", default=os.environ.get("PIER_BASE_IMAGE", "pier-base:bookworm"))
    parser.add_argument("--part", choices=("all", "guard", "runsc"), default="all")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="pier-bench-runtime-"))
    try:
        if args.part in ("all", "runsc"):
            report(home, args.image, args.runs)
        if args.part in ("all", "guard"):
            guard(home, args.image, args.runs)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def guard(home: Path, image: str, runs: int) -> None:
    """The disk guard's cost on runc, its ways taking turns in each round: a
    spare disk, a spare disk as before (the `mount` tool's process and an
    inspect for the layer's folder, the baseline of the kernel calls and the
    layerdb read), mkfs per sandbox, no disk limit."""
    spare = DockerBackend(Settings(home=home, disk_guard_spares=2))
    before = DockerBackend(Settings(home=home, disk_guard_spares=2))
    formatting = DockerBackend(Settings(home=home, disk_guard_spares=0))
    bare = DockerBackend(Settings(home=home))
    size = 10 << 30
    spares = spare._spares
    spares.fill(size)
    names = ("spare", "before", "formatted", "none")
    ways: dict[str, list[float]] = {name: [] for name in names}
    first: dict[str, list[float]] = {name: [] for name in names}
    steps: dict[str, list[float]] = {name: [] for name in names}
    load = os.getloadavg()[0]
    guard_disk, loop_mount, upper_dir = DockerBackend._guard_disk, diskguard.loop_mount, diskguard.upper_dir
    current: dict[str, str | int] = {"way": "none", "round": 0}

    def timed_guard(self, *args, **kwargs):  # the guard's whole step in create: the layer's folder, the mount
        began = time.perf_counter()
        try:
            return guard_disk(self, *args, **kwargs)
        finally:
            if current["round"]:  # the first round warms each way up
                steps[str(current["way"])].append(time.perf_counter() - began)

    def as_before(image_file: Path, target: Path) -> None:
        diskguard._run(["mount", "-o", "loop,nosuid,nodev", str(image_file), str(target)])

    DockerBackend._guard_disk = timed_guard  # type: ignore[method-assign]
    try:
        for n in range(runs + 1):
            order = [("spare", spare, "10G"), ("before", before, "10G"), ("formatted", formatting, "10G"),
                     ("none", bare, None)]  # fmt: skip
            for name, backend, disk in order[n % 4 :] + order[: n % 4]:
                current["way"], current["round"] = name, n
                while name in ("spare", "before") and len(list(spares.folder.glob("*.ext4"))) < spares.count:
                    time.sleep(0.05)  # refilled between runs, as between a server's runs
                if name == "before":
                    diskguard.loop_mount, diskguard.upper_dir = as_before, lambda *_: None
                try:
                    to_first = first_command(backend, image, disk)
                    total = with_delete(backend, image, disk)
                finally:
                    diskguard.loop_mount, diskguard.upper_dir = loop_mount, upper_dir
                if n:  # the first round warms each way up
                    first[name].append(to_first)
                    ways[name].append(total)
    finally:
        DockerBackend._guard_disk = guard_disk  # type: ignore[method-assign]
    med = statistics.median
    print(
        f"disk guard (10G, runc), {runs} rounds, load average {load:.1f} -> {os.getloadavg()[0]:.1f}, medians:"
    )
    labels = {"none": "no disk limit", "formatted": "guard, mkfs per sandbox", "spare": "guard, a spare disk",
              "before": "guard, spare, mount tool+inspect"}  # fmt: skip
    for name in ("none", "formatted", "before", "spare"):
        f, t = med(first[name]), med(ways[name])
        extra = "" if name == "none" else (
            f"   +{(f - med(first['none'])) * 1000:.0f} ms / +{(t - med(ways['none'])) * 1000:.0f} ms"
        )  # fmt: skip
        print(f"  {labels[name]:<33} create -> first command {f:.3f} s, create+exec+delete {t:.3f} s{extra}")
    print(f"  the guard's step in create (its layer's folder and mount; medians of {len(steps['spare'])}):")
    for name in ("formatted", "before", "spare"):
        print(f"    {labels[name]:<33} {med(steps[name]) * 1000:6.1f} ms")
    print(f"  a spare disk now / as before: {med(steps['spare']) / med(steps['before']):.2f}x")


def report(home: Path, image: str, runs: int) -> None:
    figures: dict[str, dict[str, float]] = {}
    for name in RUNTIMES:
        settings = Settings(home=home, sandbox_runtime=None if name == "runc" else name, base_image=image)
        figures[name] = measure(settings, image, runs)
    print(f"load average {os.getloadavg()[0]:.1f}, {runs} runs each, median seconds")
    print(f"{'':26}{'runc':>8}{'runsc':>8}{'runsc/runc':>12}")
    for what, runc in figures["runc"].items():
        runsc = figures["runsc"][what]
        print(f"{what:26}{runc:8.2f}{runsc:8.2f}{runsc / runc:11.2f}x")


if __name__ == "__main__":
    main()
