"""How long `pier` takes to start, against the interpreter doing nothing.

Prints the median wall time (and CPU time: user + system, which a loaded machine
inflates far less than wall time) of the commands that only read (`pier --help`,
`runs`, `logs`, `validate examples/hello`, `snapshot list`, `routine list`)
through the venv's entry point, and of `python -c pass` with the same
interpreter, measured in the same run, against their goals, plus the top imports
of `pier runs` by `python -X importtime`. The database is migrated before the
timing (only a first call ever migrates).

With --compare PATH (another checkout's `pier`, e.g. the main branch's venv), each
command is timed with both, one call after the other, so the two see the same load.
With --instructions, each command's instruction count (valgrind's cachegrind,
which a loaded machine does not change) is printed instead, against `python -c pass`'s.

    uv run python bench/cli_start.py [--runs 7] [--compare ../main/.venv/bin/pier] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def median_seconds(cmd: list[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    """Median wall and CPU seconds of `cmd` over `runs` calls."""
    walls, cpus = [], []
    for _ in range(runs):
        began, cpu_before = time.perf_counter(), children_cpu()
        done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
        walls.append(time.perf_counter() - began)
        cpus.append(children_cpu() - cpu_before)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-500:]}")
    return statistics.median(walls), statistics.median(cpus)


# (name, argv, goal in seconds of wall time on an idle machine, exit codes it may give)
COMMANDS = [
    ("pier --help", ["--help"], 0.25, (0,)),
    ("pier runs", ["runs"], 0.4, (0,)),
    ("pier logs <missing id>", ["logs", "0123456789abcdef"], 0.4, (1,)),
    ("pier validate examples/hello", ["validate", "examples/hello"], 0.6, (0,)),
    ("pier snapshot list", ["snapshot", "list"], 0.6, (0, 1)),
    ("pier routine list", ["routine", "list"], 0.4, (0,)),
]


def timed(cmd: list[str], env: dict[str, str], codes: tuple[int, ...]) -> tuple[float, float]:
    began, cpu_before = time.perf_counter(), children_cpu()
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in codes:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-500:]}")
    return time.perf_counter() - began, children_cpu() - cpu_before


def medians(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def instructions(cmd: list[str], env: dict[str, str]) -> int:
    """The instructions `cmd` executes (valgrind --tool=cachegrind, no cache simulation)."""
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *cmd],
        env=env, cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    match = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if match is None:
        raise SystemExit(f"no instruction count from valgrind for {' '.join(cmd)}: {done.stderr[-500:]}")
    return int(match.group(1).replace(",", ""))


def print_instructions(piers: dict[str, str], env: dict[str, str]) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind")
    base = instructions([sys.executable, "-c", "pass"], env)
    print(f"python -c pass (baseline): {base / 1e9:.3f} G instructions")
    for name, argv, _goal, _codes in COMMANDS:
        for which, binary in piers.items():
            count = instructions([binary, *argv], env)
            print(f"{name:30s} {which:9s} {count / 1e9:.3f} G instructions {count / base:5.1f}x")


def top_imports(env: dict[str, str], count: int = 8) -> list[tuple[int, str]]:
    code = "import sys; sys.argv = ['pier', 'runs']\nfrom pier.cli import app\ntry:\n    app()\nexcept SystemExit:\n    pass"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], env=env, cwd=ROOT, capture_output=True, text=True
    )
    rows = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if match and len(match.group(2)) <= 2:  # top-level imports only
            rows.append((int(match.group(1)), match.group(3)))
    return sorted(rows, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--compare", help="another `pier` to time beside this one (e.g. main's)")
    parser.add_argument("--instructions", action="store_true", help="count instructions (valgrind) instead")
    args = parser.parse_args()

    pier = shutil.which("pier", path=str(Path(sys.executable).parent))
    if pier is None:
        raise SystemExit(
            "no `pier` entry point beside this interpreter: run with `uv run python bench/cli_start.py`"
        )
    piers = {"this": pier, **({"compared": args.compare} if args.compare else {})}
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PIER_HOME": home}
        for binary in piers.values():  # migrate once, outside the timing
            subprocess.run([binary, "runs"], env=env, cwd=ROOT, capture_output=True, check=True)
        if args.instructions:  # the load does not change them, but say what it was
            print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            print_instructions(piers, env)
            print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            return
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        baseline = median_seconds([sys.executable, "-c", "pass"], args.runs, env)
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            for name, argv, _goal, codes in COMMANDS:
                for which, binary in piers.items():
                    samples.setdefault((name, which), []).append(timed([binary, *argv], env, codes))
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        wall0, cpu0 = baseline
        print(f"python -c pass (baseline): {wall0:.3f} s wall, {cpu0:.3f} s CPU (medians of {args.runs})")
        for name, _argv, goal, _codes in COMMANDS:
            for which in piers:
                wall, cpu = medians(samples[(name, which)])
                print(
                    f"{name:30s} {which:9s} {wall:.3f} s wall {wall / wall0:5.1f}x   {cpu:.3f} s CPU "
                    f"{cpu / max(cpu0, 1e-3):5.1f}x   (goal <= {goal} s wall)"
                )
        print("\nslowest top-level imports of `pier runs` (cumulative microseconds):")
        for micros, module in top_imports(env):
            print(f"  {micros:>9,d}  {module}")


if __name__ == "__main__":
    main()
