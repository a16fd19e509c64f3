"""`pier serve` and `pier run` on the same PIER_HOME (and database), as the README
suggests: the server's start-up recovery and its periodic sweep leave alone a
run whose `pier run` process is alive, and end one whose process is gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.support.api_server import Server

from pier.record import RunRecord, RunStatus, StageStatus
from pier.sandbox.base import LABEL_RUN
from pier.store import Store

pytestmark = pytest.mark.integration

WAITS_FOR_GO = """---
agent: script
snapshot: ""
---
```bash
echo waiting
while [ ! -f /app/go ]; do sleep 0.2; done
echo done > {{results_dir}}/done.txt
```
"""


def wait_for(store: Store, done: Callable[[RunRecord], bool], proc: subprocess.Popen) -> RunRecord:
    deadline = time.monotonic() + 180
    while True:
        records, _ = store.list_runs(limit=1)
        if records and done(records[0]):
            return records[0]
        assert proc.poll() is None, f"pier run exited ({proc.returncode})"
        assert time.monotonic() < deadline, f"the run never got there: {records and records[0].status}"
        time.sleep(0.1)


def test_starting_the_server_leaves_a_live_cli_run_alone(new_db, tmp_path: Path, docker_backend, base_image):
    home, db = tmp_path / "home", new_db()
    home.mkdir()
    (tmp_path / "RUNBOOK.md").write_text(WAITS_FOR_GO)
    env = {**os.environ, "PIER_HOME": str(home), "PIER_DATABASE_URL": db}
    cli = subprocess.Popen(
        [sys.executable, "-m", "pier.cli", "run", str(tmp_path), "--image", base_image, "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    server = Server(home=home, db_url=db, settings={"PIER_SWEEP_INTERVAL_SEC": "1"})
    try:
        with Store.open(db) as store:
            agent_runs = lambda r: r.stage("run_agent").status == StageStatus.running  # noqa: E731
            record = wait_for(store, agent_runs, cli)
            sandboxes = [
                s for s in docker_backend.list_sandboxes() if s.labels.get(LABEL_RUN) == record.trajectory_id
            ]
            assert len(sandboxes) == 1
            server.start()  # its recovery has run once it answers
            time.sleep(2.5)  # and its periodic sweep, every second
            assert store.get_run(record.trajectory_id).status == RunStatus.running, server.log_tail()
            assert any(s.id == sandboxes[0].id for s in docker_backend.list_sandboxes()), (
                "the server swept it"
            )
            assert docker_backend.attach(sandboxes[0].id).exec(["touch", "/app/go"], workdir="/").ok
            stdout, stderr = cli.communicate(timeout=180)
        assert cli.returncode == 0, stderr
        final = json.loads(stdout)
        assert (final["status"], final["steps"]["run"]["outputs"]["success"]) == ("completed", True)
    finally:
        server.stop()
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def test_the_servers_sweep_ends_a_run_whose_cli_was_killed(
    new_db, tmp_path: Path, docker_backend, base_image
):
    home, db = tmp_path / "home", new_db()
    home.mkdir()
    (tmp_path / "RUNBOOK.md").write_text(WAITS_FOR_GO)
    env = {**os.environ, "PIER_HOME": str(home), "PIER_DATABASE_URL": db}
    cli = subprocess.Popen(
        [sys.executable, "-m", "pier.cli", "run", str(tmp_path), "--image", base_image, "--json"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server = Server(home=home, db_url=db, settings={"PIER_SWEEP_INTERVAL_SEC": "1"}).start()
    try:
        with Store.open(db) as store:
            record = wait_for(store, lambda r: r.stage("run_agent").status == StageStatus.running, cli)
            cli.kill()
            cli.wait()
            deadline = time.monotonic() + 60
            while not store.get_run(record.trajectory_id).status.terminal:
                assert time.monotonic() < deadline, "the server's sweep did not end the run"
                time.sleep(0.2)
            ended = store.get_run(record.trajectory_id)
        assert ended.status == RunStatus.failed and "killed" in (ended.error if ended.error else "")
        deadline = time.monotonic() + 60
        while [s for s in docker_backend.list_sandboxes() if s.labels.get(LABEL_RUN) == record.trajectory_id]:
            assert time.monotonic() < deadline, "the server's sweep left the sandbox"
            time.sleep(0.2)
    finally:
        server.stop()
