"""Runs that know their deadline, and sandboxes that outlive one agent exit
(keep, continue, snapshot), on a real Docker engine with the script agent."""

from __future__ import annotations

import time

import pytest
from tests.integration.test_lifecycle import on_image, runbook, sandboxes_of, start
from tests.support.runs import run_folder

pytestmark = pytest.mark.integration

GRACEFUL = """echo "deadline=$PIER_DEADLINE now=$(date +%s)" > {{results_dir}}/deadline.txt
trap 'echo "wrapped up at $(date +%s)" > {{results_dir}}/grace.txt; echo "agent: wrapping up"; exit 0' TERM
echo started
sleep 120 &
wait"""


def test_the_agent_knows_its_deadline_and_what_it_writes_in_the_grace_is_collected(
    base_image, docker_backend, monkeypatch
):
    monkeypatch.setenv("PIER_KILL_GRACE_SEC", "20")
    began = time.time()
    record = start(runbook(GRACEFUL), on_image(base_image), timeout_sec=4)
    assert record.status == "failed" and record.failed_stage == "run_agent"
    assert "timed out after 4 seconds" in record.error and "SIGTERM" in record.error
    results = run_folder(record) / "results"
    seen = dict(part.split("=") for part in (results / "deadline.txt").read_text().split())
    assert 3 <= int(seen["deadline"]) - int(seen["now"]) <= 4, seen
    assert abs(int(seen["deadline"]) - (began + 4)) < 30
    grace = results / "grace.txt"
    assert grace.exists(), "what the agent wrote after SIGTERM was not collected"
    assert int(grace.read_text().split()[-1]) >= int(seen["deadline"]) - 1
    assert record.stage("run_agent").duration_seconds < 20, "the exec waited out the grace for nothing"
    log = (run_folder(record) / "logs" / "agent.log").read_text()
    assert "agent: wrapping up" in log, "what the agent printed in its grace is not in its log"
    assert not sandboxes_of(docker_backend, record.trajectory_id)


def test_an_agent_that_ignores_sigterm_is_killed_when_its_grace_is_over(base_image, monkeypatch):
    monkeypatch.setenv("PIER_KILL_GRACE_SEC", "3")
    record = start(runbook("trap '' TERM\nwhile :; do sleep 0.2; done"), on_image(base_image), timeout_sec=2)
    assert record.failed_stage == "run_agent" and "timed out" in record.error
    assert 5 <= record.stage("run_agent").duration_seconds < 15
