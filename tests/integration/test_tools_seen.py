"""The tools probe runs once per image content, not once per `pier run`: what a
run found in an image is kept in PIER_HOME by the image's content id, so the
next `pier run` (a new process) starts its agent without probing again. Seen
from the engine: the execs in each run's sandbox (`docker events`)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.api_server import runbook

pytestmark = pytest.mark.integration

RUNBOOK = runbook("echo hello > {{results_dir}}/out.txt", snapshot="")


def execs_in(sandbox_id: str, since: int) -> int:
    events = subprocess.run(
        ["docker", "events", "--since", str(since), "--until", str(int(time.time()) + 1),
         "--filter", f"container={sandbox_id}", "--filter", "event=exec_create", "--format", "{{.Action}}"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return sum(1 for line in events.stdout.splitlines() if line.startswith("exec_create"))


def test_a_second_pier_run_on_the_same_image_does_not_probe_its_tools(base_image, tmp_path: Path, pier_home):
    runbook = tmp_path / "RUNBOOK.md"
    runbook.write_text(RUNBOOK)
    since = int(time.time()) - 1
    sandboxes = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "pier.cli", "run", str(runbook), "--image", base_image, "--json"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        record = json.loads(done.stdout)
        sandboxes.append(record["steps"]["run"]["outputs"]["sandbox"]["id"])
    first, second = (execs_in(sandbox, since) for sandbox in sandboxes)
    assert (first, second) == (3, 2)  # probe, agent, collect; then agent, collect
    kept = list((pier_home / "cache" / "tools").glob("sha256-*.json"))
    assert len(kept) == 1 and "bash" in json.loads(kept[0].read_text())
