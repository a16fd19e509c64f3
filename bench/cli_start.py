"""How long `pier` takes to start, against the interpreter doing nothing.

Prints the median wall time (and CPU time: user + system, which a loaded machine
inflates far less than wall time) of `pier --help`, `pier runs` and `pier validate
examples/hello` through the venv's entry point, and of `python -c pass` with the
same interpreter, measured in the same run (goal for `pier --help`: <= 0.25 s),
plus the top imports of `pier --help` by `python -X importtime`.

    uv run python bench/cli_start.py [--runs 7]
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


def top_imports(env: dict[str, str], count: int = 8) -> list[tuple[int, str]]:
    code = "import sys; sys.argv = ['pier', '--help']\nfrom pier.cli import app\ntry:\n    app()\nexcept SystemExit:\n    pass"
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
    args = parser.parse_args()

    pier = shutil.which("pier", path=str(Path(sys.executable).parent))
    if pier is None:
        raise SystemExit(
            "no `pier` entry point beside this interpreter: run with `uv run python bench/cli_start.py`"
        )
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PIER_HOME": home}
        baseline = median_seconds([sys.executable, "-c", "pass"], args.runs, env)
        rows = [
            ("pier --help", median_seconds([pier, "--help"], args.runs, env)),
            ("pier runs", median_seconds([pier, "runs"], args.runs, env)),
            (
                "pier validate examples/hello",
                median_seconds([pier, "validate", "examples/hello"], args.runs, env),
            ),
        ]
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        wall0, cpu0 = baseline
        print(f"python -c pass (baseline): {wall0:.3f} s wall, {cpu0:.3f} s CPU (medians of {args.runs})")
        for name, (wall, cpu) in rows:
            print(
                f"{name:30s} {wall:.3f} s wall {wall / wall0:5.1f}x (+{wall - wall0:.3f} s)"
                f"   {cpu:.3f} s CPU (+{cpu - cpu0:.3f} s)"
            )
        print("\nslowest top-level imports of `pier --help` (cumulative microseconds):")
        for micros, module in top_imports(env):
            print(f"  {micros:>9,d}  {module}")


if __name__ == "__main__":
    main()
