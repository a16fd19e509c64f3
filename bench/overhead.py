"""pier's overhead on a trivial runbook, against raw docker doing the same work.

Prints the median wall time of `pier run` (a script runbook that writes one file)
as its console script runs it (handed to the resident process, pier.launch) and
in its own process (`python -m pier.cli`, as with PIER_RESIDENT=false), and of
`docker run` + `docker cp` doing the same on the same image, their ratio
(goal: <= 1.5), the same lifecycle run in-process (as the server runs it, without
the CLI's interpreter start-up; goal <= 1.2), in-process again with a warm pool of
one sandbox (refilled between runs, as a server's is), and the median time from
the start to the agent's first output line for each (goal <= 0.3 s), with the
load average. Both sides run on the same OCI runtime (--runtime, default runc:
pier's own default is runsc where the engine has it, and raw docker's is the
engine's default, so without it the ratio would compare gVisor with runc), and
pier's sandboxes have no disk limit unless --disk-limit (raw docker has none).
Needs a Docker engine and the image (default pier-base:bookworm).

    uv run python bench/overhead.py [--runs 10] [--image pier-base:bookworm] [--runtime runc]
                                    [--disk-limit 10G]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNBOOK = """---
agent: script
snapshot: ""
---
```bash
echo "first line"
echo hello > {{results_dir}}/out.txt
```
"""


def time_pier(
    runbook: Path, image: str, env: dict[str, str], python: str = sys.executable, entry: str = "pier.cli"
) -> tuple[float, float]:
    """(wall seconds, seconds to the first agent output line); its CPU seconds
    (user + system, which the load does not stretch) are added to CPU[python]
    (CPU[entry] for another entry point). Entry pier.cli is the command run in
    its own process; pier.launch is the console script's (the resident's, when one answers)."""
    cmd = [python, "-m", entry, "run", str(runbook), "--image", image]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    first = None
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if first is None and "first line" in line:
                first = time.perf_counter() - began
        code = proc.wait()
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    key = python if entry == "pier.cli" else entry
    CPU.setdefault(key, []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if code != 0 or first is None:
        raise SystemExit(f"pier run failed (exit {code})")
    return wall, first


CPU: dict[str, list[float]] = {}  # CPU seconds of each pier run, by interpreter


def time_in_process(runbook: Path, image: str, services=None) -> tuple[float, float]:
    """The lifecycle alone, as `pier serve` runs it: no interpreter start-up or
    imports. (wall seconds, seconds to the first agent output line). With a warm
    pool in `services`, waits for it to be full first, as between a server's runs."""
    from pier.lifecycle.start import Observer, RunRequest, Services, run
    from pier.runbook import load
    from pier.settings import Settings
    from pier.tasks import task_from_runbook

    services = services or Services(Settings())
    if services.pool is not None and not services.pool.wait_ready(120):
        raise SystemExit("the warm pool did not fill in 120 s")
    request = RunRequest(
        collection="bench", task_name="overhead", task=task_from_runbook(load(runbook)),
        run_params={"snapshot": "", "image": image},
    )  # fmt: skip
    first: list[float] = []
    began = time.perf_counter()

    def on_log(stage: str, line: str) -> None:
        if not first and stage == "run_agent" and "first line" in line:
            first.append(time.perf_counter() - began)

    record = run(services, request, Observer(on_log=on_log))
    if not record.success:
        raise SystemExit(f"in-process run failed: {record.error}")
    if services.pool is not None and (record.outputs.sandbox is None or record.outputs.sandbox.pool != "hit"):
        raise SystemExit(f"the run missed the warm pool: {record.outputs.sandbox}")
    return time.perf_counter() - began, first[0] if first else float("nan")


def pooled_services(image: str):
    """Services with a warm pool of one sandbox matching the bench's runs."""
    from pier.lifecycle.start import Services
    from pier.settings import Settings, WarmPoolEntry

    services = Services(Settings(warm_pool=[WarmPoolEntry(image=image, size=1)]))
    services.start_pool()
    return services


RUNTIME = ["--runtime", "runc"]  # raw docker's, set from --runtime
LABEL = ["--label", "pier.bench=overhead"]


def time_docker(image: str, out: Path) -> float:
    began = time.perf_counter()
    cid = subprocess.check_output(
        ["docker", "run", "-d", "--init", *RUNTIME, *LABEL, image, "bash", "-c", "mkdir -p /app/results && "
         "echo 'first line' && echo hello > /app/results/out.txt && sleep infinity"],
        text=True,
    ).strip()  # fmt: skip
    try:
        subprocess.run(["docker", "exec", cid, "true"], check=True)
        subprocess.run(["docker", "cp", f"{cid}:/app/results", str(out)], check=True, capture_output=True)
    finally:
        subprocess.run(["docker", "rm", "-f", cid], check=True, capture_output=True)
    return time.perf_counter() - began


def time_docker_first(image: str) -> float:
    """Seconds from `docker run` to its first output line: the baseline of pier's."""
    began = time.perf_counter()
    cmd = [
        "docker",
        "run",
        "--rm",
        "--init",
        *RUNTIME,
        *LABEL,
        image,
        "bash",
        "-c",
        "echo 'first line' && sleep 0.2",
    ]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        first = next((time.perf_counter() - began for line in proc.stdout if "first line" in line), None)
        proc.wait()
    if proc.returncode != 0 or first is None:
        raise SystemExit(f"docker run failed (exit {proc.returncode})")
    return first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--image", default=os.environ.get("PIER_TEST_IMAGE", "pier-base:bookworm"))
    parser.add_argument(
        "--compare",
        metavar="PYTHON",
        help="another checkout's interpreter (.venv/bin/python): its `pier run` too",
    )
    parser.add_argument("--runtime", default="runc", help="the OCI runtime of both sides (runc, runsc)")
    parser.add_argument(
        "--disk-limit", default="", help="pier's PIER_DISK_LIMIT (default none, as raw docker)"
    )
    args = parser.parse_args()
    RUNTIME[1] = args.runtime
    os.environ["PIER_SANDBOX_RUNTIME"] = args.runtime
    os.environ["PIER_DISK_LIMIT"] = args.disk_limit
    work = Path(tempfile.mkdtemp(prefix="pier-bench-"))
    env = {**os.environ, "PIER_HOME": str(work / "home")}
    runbook = work / "RUNBOOK.md"
    runbook.write_text(RUNBOOK)
    time_pier(runbook, args.image, env)  # warm-up: store created, image checked
    # `pier run` as its console script runs it: the first starts a resident, the rest hand their run to it.
    resident_dir = work / "resident"
    env_resident = {**env, "PIER_RESIDENT": "true", "PIER_RESIDENT_DIR": str(resident_dir)}
    time_pier(runbook, args.image, env_resident, entry="pier.launch")
    deadline = time.monotonic() + 60
    while not any(resident_dir.glob("*.sock")):
        if time.monotonic() > deadline:
            raise SystemExit("no resident started in 60 s")
        time.sleep(0.1)
    os.environ["PIER_HOME"] = env["PIER_HOME"]
    time_in_process(runbook, args.image)  # warm-up of this process's imports and connection
    pooled = pooled_services(args.image)
    load_before = os.getloadavg()
    pier, first, raw, inproc, inproc_first, warm, warm_first = [], [], [], [], [], [], []
    handed: list[tuple[float, float]] = []
    raw_first: list[float] = []
    other: list[tuple[float, float]] = []
    try:
        for index in range(args.runs):
            wall, to_first = time_pier(runbook, args.image, env)
            pier.append(wall)
            first.append(to_first)
            handed.append(time_pier(runbook, args.image, env_resident, entry="pier.launch"))
            if args.compare:
                other.append(time_pier(runbook, args.image, env, args.compare))
            raw.append(time_docker(args.image, work / f"raw-{index}"))
            raw_first.append(time_docker_first(args.image))
            wall, to_first = time_in_process(runbook, args.image)
            inproc.append(wall)
            inproc_first.append(to_first)
            wall, to_first = time_in_process(runbook, args.image, pooled)
            warm.append(wall)
            warm_first.append(to_first)
    finally:
        if pooled.pool is not None:
            pooled.pool.close()
        subprocess.run(["pkill", "-f", f"pier.resident serve {resident_dir}"], check=False)
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median
    p, r = med(pier), med(raw)
    print(f"runs: {args.runs} on {args.image}, runtime {args.runtime} both sides, "
          f"pier's disk limit {args.disk_limit or 'none'}")  # fmt: skip
    print(f"load average before / after:  {_load(load_before)} / {_load(os.getloadavg())}")
    print(f"docker run + cp (median):     {r:.3f} s (baseline)")
    h, hf = med(w for w, _ in handed), med(f for _, f in handed)
    print(f"pier run (median):            {h:.3f} s  ratio {h / r:.2f} (goal <= 1.5; handed to the resident)")
    print(
        f"  in its own process:         {p:.3f} s  ratio {p / r:.2f} (PIER_RESIDENT=false, or no resident yet)"
    )
    i, w = med(inproc), med(warm)
    print(
        f"lifecycle in-process (median): {i:.3f} s  ratio {i / r:.2f} (goal <= 1.2; no interpreter start-up)"
    )
    print(f"  with a warm pool (median):   {w:.3f} s  ratio {w / r:.2f}")
    print(f"start to first agent line:    pier run {hf:.3f} s (in its own process {med(first):.3f} s), "
          f"in-process {med(inproc_first):.3f} s, "
          f"with a warm pool {med(warm_first):.3f} s (medians; goal <= 0.3)")  # fmt: skip
    print(f"  docker run to its first line: {med(raw_first):.3f} s (baseline)")
    print(
        f"pier run CPU, user + system (median): {med(CPU[sys.executable][1:]):.3f} s in its own process, "
        f"{med(CPU['pier.launch'][1:]):.3f} s for the client handing over (the resident's child not counted)"
    )
    if other:
        o, of = med(w for w, _ in other), med(f for _, f in other)
        print(f"--compare {args.compare}: pier run {o:.3f} s  ratio {o / r:.2f}, first line {of:.3f} s, "
              f"CPU {med(CPU[args.compare]):.3f} s")  # fmt: skip


def _load(values: tuple[float, float, float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    main()
