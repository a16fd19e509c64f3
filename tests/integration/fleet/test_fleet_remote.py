"""`pier run --remote`: the CLI submits a run to the fleet through the
Temporal executor (one workflow per run, id = the run's id), a `pier worker`
runs it with the file attached, and the CLI prints its log, summary and exit
code as a local `pier run` does; Ctrl-C cancels it on its worker. No `pier
serve` is up: the CLI needs only the fleet's settings."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.api_server import Server, runbook
from tests.support.fleet import FAKE_BACKEND, REPO, Fleet, history_json, ran_on, wait_for

from pier.record import RunStatus

CONTENT = "attached from the CLI's host\n"


def prepare(fleet: Fleet, tmp_path: Path, **settings: str) -> tuple[Path, Path]:
    """The fleet's settings (storage every worker reaches), a runbook for the
    fake backend and a file to attach."""
    storage = (fleet.home / "storage").absolute().as_uri()
    fleet.settings.update({"PIER_SANDBOX_BACKEND": FAKE_BACKEND, "PIER_STORAGE_URL": storage, **settings})
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "RUNBOOK.md").write_text(runbook("echo hi", snapshot="", image="pier-fake:latest"))
    data = tmp_path / "data.txt"
    data.write_text(CONTENT)
    return folder, data


def cli_env(fleet: Fleet) -> dict[str, str]:
    return {**os.environ, **Server(fleet.home, fleet.db_url).env(), **fleet.env()}


def pier_run(fleet: Fleet, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier.cli", "run", "--remote", *args],
        env=cli_env(fleet), cwd=REPO, capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def test_pier_run_remote_runs_on_a_worker_and_prints_like_a_local_run(fleet: Fleet, tmp_path: Path) -> None:
    folder, data = prepare(fleet, tmp_path)
    fleet.worker("w1")
    missing = pier_run(fleet, str(folder), "--file", str(tmp_path / "nowhere.txt"))
    assert missing.returncode == 2 and "is not a file" in " ".join(missing.stderr.split()), missing.stderr
    done = pier_run(fleet, str(folder), "--file", str(data))
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"completed run ([0-9a-f]{32}) in", done.stdout)
    assert found, done.stdout
    tid = found[1]
    assert "worker w1 runs it" in done.stderr, "the run's log is printed as it goes"
    assert "asset-data.txt" in done.stdout, "the summary lists the results"
    store = fleet.store()
    assert ran_on(store, tid) == ["w1"]
    record = store.get_run(tid)
    assert record.status == RunStatus.completed
    copies = list((fleet.home / "storage").rglob("asset-data.txt"))
    assert [c.read_text() for c in copies if tid in str(c)] == [CONTENT], (
        "the attached file reached the worker"
    )
    history = history_json(fleet.address, "default", tid)
    assert "pier.run" in history, "the run went through its workflow, id = the run's id"

    as_json = pier_run(fleet, str(folder), "--json")
    assert as_json.returncode == 0, as_json.stderr
    printed = json.loads(as_json.stdout)
    assert printed["status"] == "completed" and printed["id"] == printed["trajectory_id"]
    assert printed["success"] is True and printed["task"] == "job"
    # the summary's keys first (id, success, task beside the trajectory's own), then the record as stored
    stored = json.loads(store.get_run(printed["trajectory_id"]).model_dump_json())
    assert {k: v for k, v in printed.items() if k not in ("id", "success", "task")} == stored
    assert ran_on(store, printed["trajectory_id"]) == ["w1"]
    store.close()


def test_ctrl_c_cancels_the_remote_run_on_its_worker(fleet: Fleet, tmp_path: Path) -> None:
    folder, _ = prepare(fleet, tmp_path, PIER_TEST_AGENT_SEC="120")
    fleet.worker("w1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pier.cli", "run", "--remote", str(folder)],
        env=cli_env(fleet), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    store = fleet.store()
    try:
        running = wait_for(
            lambda: next(
                (r for r in store.list_runs(limit=5)[0] if r.stage("run_agent").status == "running"), None
            ),
            90,
            "the agent started on the worker",
        )
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGINT, stdout + stderr
    assert f"cancelling run {running.trajectory_id}" in stderr
    assert store.get_run(running.trajectory_id).status == RunStatus.cancelled
    assert f"cancelled run {running.trajectory_id}" in stdout
    assert any("deleted" in e.line for e in store.events(running.trajectory_id)), "its sandbox was deleted"
    store.close()
