"""Workflows started by an earlier pier replay on this one: a worker upgraded
while runs are open must take their histories up where they are (any change
to the workflow's commands goes behind `workflow.patched`). The histories
here were recorded from real fleet runs (bench/fleet.py --part breakdown
--keep-histories) by the versions their names say."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from pier.executors.temporal.worker import RUNNER, WORKFLOWS
from tests.support.aio import run_coroutine

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
def test_recorded_history_replays(path: Path):
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(workflows=WORKFLOWS, workflow_runner=RUNNER)
    result = run_coroutine(replayer.replay_workflow(history, raise_on_replay_failure=False))
    assert result.replay_failure is None, result.replay_failure


def test_there_are_histories_to_replay():
    # claim-begin-conclude: before `pier.run` (and a claim by a worker from
    # then); claim-run: the lifecycle in one activity
    assert any("claim-begin-conclude" in p.name for p in HISTORIES)
    assert any("claim-run" in p.name for p in HISTORIES)
    # a workflow task's (pier-steps): its steps, a fan-out's child workflows,
    # a worker SIGKILLed mid-fan-out (test_fleet_workflows.py)
    assert any(p.name.startswith("steps-") for p in HISTORIES)
