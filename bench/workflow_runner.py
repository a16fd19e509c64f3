"""What Temporal's workflow sandbox costs pier's workflow, per run.

Replays the recorded histories (tests/unit/executors/histories: each a whole
run, its workflow created and every workflow task of it processed) --runs
times each with pier's runner (SandboxedWorkflowRunner, pier passed through)
and with UnsandboxedWorkflowRunner, alternating, in this process: CPU and
wall per run. The first pass of each runner is a warm-up and not counted. No
Temporal server needed.

    uv run python bench/workflow_runner.py [--runs 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, WorkflowRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pier.executors.temporal.worker import RUNNER
from pier.executors.temporal.workflow import RunWorkflow

SANDBOXED, UNSANDBOXED = "sandboxed (pier's)", "unsandboxed"
HISTORIES = Path(__file__).resolve().parents[1] / "tests" / "unit" / "executors" / "histories"


async def replay(runner: WorkflowRunner, texts: list[tuple[str, str]], runs: int) -> tuple[float, float]:
    """CPU and wall seconds per replayed run."""

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for n in range(runs):
            name, text = texts[n % len(texts)]
            yield WorkflowHistory.from_json(f"{name}-{n}", text)

    replayer = Replayer(workflows=[RunWorkflow], workflow_runner=runner)
    wall, cpu = time.perf_counter(), time.process_time()
    await replayer.replay_workflows(histories(), raise_on_replay_failure=True)
    return (time.process_time() - cpu) / runs, (time.perf_counter() - wall) / runs


async def main(runs: int, rounds: int) -> None:
    texts = [(p.stem, p.read_text()) for p in sorted(HISTORIES.glob("*.json"))]
    runners: dict[str, WorkflowRunner] = {SANDBOXED: RUNNER, UNSANDBOXED: UnsandboxedWorkflowRunner()}
    for runner in runners.values():
        await replay(runner, texts, 20)  # warm-up: imports, the first sandbox
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
    for round_ in range(rounds):
        for name in list(runners) if round_ % 2 == 0 else list(runners)[::-1]:
            got[name].append(await replay(runners[name], texts, runs))
    print(f"{runs} replayed runs x {rounds} rounds ({len(texts)} recorded histories), median of the rounds")
    print(f"{'runner':<20} {'CPU ms/run':>11} {'wall ms/run':>12}")
    cpu = {}
    for name, values in got.items():
        cpu[name] = statistics.median(c for c, _ in values) * 1000
        print(f"{name:<20} {cpu[name]:>11.2f} {statistics.median(w for _, w in values) * 1000:>12.2f}")
    print(f"the sandbox costs {cpu[SANDBOXED] - cpu[UNSANDBOXED]:+.2f} ms CPU per run "
          f"({cpu[SANDBOXED] / cpu[UNSANDBOXED]:.2f}x); load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.rounds))
