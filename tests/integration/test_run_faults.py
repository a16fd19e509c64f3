"""Real signals to real `pier run` processes on a real engine. Whatever stops the
process, the run ends saying why and leaves nothing behind: no sandbox, no
scratch files, no run `running` forever.

- SIGINT, SIGTERM, SIGHUP: pier run itself cancels the run, deletes the sandbox
  and its scratch files, and exits with 128 + the signal.
- SIGKILL: the process cannot clean up, and stays a zombie until its parent (this
  test) reaps it; the next `pier` command ends the run as failed and removes
  what it left.

A run is held in a stage by a runbook that waits there: create by a snapshot
whose build sleeps, set up by a large attached file, the agent by `sleep`, check
by a code check that sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pier.db import Store
from pier.lifecycle.context import scratch_dir
from pier.record import RunStatus, StageStatus, Trajectory
from pier.sandbox.base import LABEL_RUN
from pier.settings import Settings

pytestmark = pytest.mark.integration

WAIT_SEC = 180
CLI = [sys.executable, "-m", "pier.cli"]


def runbook(script: str, **front: object) -> str:
    front.setdefault("agent", "script")
    front.setdefault("snapshot", "")
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    return "---\n" + "\n".join(lines) + f"\n---\n# test\n\n```bash\n{script}\n```\n"


@dataclass
class Home:
    """A PIER_HOME of its own, the runs in it, and the `pier` commands on it."""

    path: Path
    image: str

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PIER_HOME": str(self.path)}
        env.pop("PIER_DATABASE_URL", None)
        return env

    def store(self) -> Store:
        return Store.open(f"sqlite:///{self.path / 'pier.db'}")

    def start(self, folder: Path, *args: str) -> subprocess.Popen:
        """`pier run` on the runbook in folder, as its own process group (a terminal's job)."""
        log = open(folder / "pier-run.log", "wb")  # noqa: SIM115 - the child writes it
        proc = subprocess.Popen(
            [*CLI, "run", str(folder), "--json", *args], env=self.env(),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()
        return proc

    def pier(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args], env=self.env(), capture_output=True, text=True, timeout=timeout)

    def only_run(self) -> Trajectory | None:
        with self.store() as store:
            records, _ = store.list_runs(limit=2)
        assert len(records) <= 1, "this home holds one run"
        return records[0] if records else None

    def wait(self, proc: subprocess.Popen, done: Callable[[Trajectory], bool], what: str) -> Trajectory:
        """Poll the store until the run satisfies done (the pier process must live on)."""
        deadline = time.monotonic() + WAIT_SEC
        while True:
            record = self.only_run()
            if record is not None and done(record):
                return record
            if proc.poll() is not None:
                raise AssertionError(f"pier run exited ({proc.returncode}) before {what}")
            assert time.monotonic() < deadline, f"the run never reached {what}: {record and record.status}"
            time.sleep(0.05)


def in_stage(stage: str) -> Callable[[Trajectory], bool]:
    return lambda r: r.status == RunStatus.running and r.stage(stage).status == StageStatus.running


def sandboxes_of(backend, trajectory_id: str) -> list:
    return [s for s in backend.list_sandboxes() if s.labels.get(LABEL_RUN) == trajectory_id]


@pytest.fixture
def home(tmp_path: Path, base_image: str) -> Iterator[Home]:
    yield Home(tmp_path / "home", base_image)


@dataclass(frozen=True)
class Held:
    """A runbook folder and `pier run` arguments that hold a run in `stage`, and
    what shows the test that it is there."""

    stage: str
    folder: Path
    args: tuple[str, ...]
    there: Callable[[Home, Trajectory], bool]


def hold(stage: str, tmp_path: Path, image: str) -> Held:
    folder = tmp_path / "runbook"
    folder.mkdir()
    on_image = ("--image", image)
    if stage == "create":  # the image is built from a recipe whose build never ends
        (tmp_path / "home").mkdir(exist_ok=True)
        recipe = f"FROM {image}\nRUN echo {tmp_path.name} && sleep 600\n"
        (tmp_path / "home" / "snapshots.yaml").write_text(
            json.dumps({"snapshots": {"slow": {"dockerfile": recipe}}})
        )
        (folder / "RUNBOOK.md").write_text(runbook("echo never > {{results_dir}}/x", snapshot="slow"))
        return Held(stage, folder, (), lambda home, r: in_stage("create")(r))
    if stage == "setup":  # a large attached file: its tar is in the scratch folder for a while
        big = tmp_path / "big.bin"
        with open(big, "wb") as out:
            out.write(os.urandom(1 << 20) * 160)
        (folder / "RUNBOOK.md").write_text(runbook("sleep 600"))

        def tar_written(home: Home, r: Trajectory) -> bool:
            scratch = scratch_dir(Settings(home=home.path), r.trajectory_id)
            return in_stage("setup")(r) and any(p.is_file() for p in scratch.rglob("*"))

        return Held(stage, folder, (*on_image, "--file", str(big)), tar_written)
    if stage == "run_agent":
        (folder / "RUNBOOK.md").write_text(runbook("echo started\nsleep 600"))
        return Held(stage, folder, on_image, lambda home, r: in_stage("run_agent")(r))
    if stage == "check":  # a code check from a local folder (copied via the scratch folder) that sleeps
        (folder / "slow-check").mkdir()
        (folder / "slow-check" / "check.sh").write_text("sleep 600\n")
        checks = [
            {"name": "slow", "type": "code", "source": "slow-check", "run": "sleep 600", "timeout_sec": 900}
        ]
        (folder / "RUNBOOK.md").write_text(runbook("echo ok > {{results_dir}}/ok.txt", checks=checks))
        return Held(stage, folder, on_image, lambda home, r: in_stage("check")(r))
    raise ValueError(stage)


STAGES = ("create", "setup", "run_agent", "check")
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGHUP}


def held_run(home: Home, tmp_path: Path, stage: str) -> tuple[subprocess.Popen, Trajectory]:
    held = hold(stage, tmp_path, home.image)
    proc = home.start(held.folder, *held.args)
    record = home.wait(proc, lambda r: held.there(home, r), f"stage {stage}")
    return proc, record


def assert_nothing_left(home: Home, record: Trajectory, backend) -> None:
    assert not sandboxes_of(backend, record.trajectory_id), "the run's sandbox is still there"
    scratch = scratch_dir(Settings(home=home.path), record.trajectory_id)
    assert not scratch.exists(), f"scratch files left: {[str(p) for p in scratch.rglob('*')]}"


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("name", list(SIGNALS))
def test_a_stop_signal_cancels_the_run_and_cleans_up(home, tmp_path, docker_backend, name, stage):
    proc, record = held_run(home, tmp_path, stage)
    if stage != "create":
        assert sandboxes_of(docker_backend, record.trajectory_id), "the held run has no sandbox"
    os.kill(proc.pid, SIGNALS[name])
    assert proc.wait(WAIT_SEC) == 128 + SIGNALS[name]
    ended = home.only_run()
    assert ended is not None
    assert (ended.status, ended.success) == (RunStatus.cancelled, False)
    assert ended.error is not None and ended.failed_stage == stage
    assert ended.error.startswith(f"the run was interrupted: pier received {name}")
    assert_nothing_left(home, ended, docker_backend)


@pytest.mark.parametrize("stage", STAGES)
def test_after_sigkill_the_next_command_ends_the_run_and_cleans_up(home, tmp_path, docker_backend, stage):
    proc, record = held_run(home, tmp_path, stage)
    proc.kill()
    os.waitid(
        os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT
    )  # dead, not reaped: a zombie, as under an init-less PID 1
    try:
        runs = home.pier("runs", "--json")
    finally:
        proc.wait()
    assert runs.returncode == 0, runs.stderr
    ended = Trajectory.model_validate_json(runs.stdout.splitlines()[0])
    assert (ended.trajectory_id, ended.status, ended.success) == (
        record.trajectory_id,
        RunStatus.failed,
        False,
    )
    assert ended.error is not None and ended.failed_stage == stage
    assert f"pid {proc.pid}" in ended.error and "killed" in ended.error
    assert f"ended run {record.trajectory_id}" in runs.stderr
    assert_nothing_left(home, ended, docker_backend)


def test_pier_sweep_removes_the_sandbox_of_a_zombie_owner(home, tmp_path, docker_backend):
    """Issue: the killed `pier run` is a zombie until reaped, and the sweep took
    it for a live owner, keeping its sandbox (forever, under a PID 1 that never reaps)."""
    proc, record = held_run(home, tmp_path, "run_agent")
    sandbox = sandboxes_of(docker_backend, record.trajectory_id)[0]
    proc.kill()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    try:
        with open(f"/proc/{proc.pid}/stat") as stat:
            assert stat.read().rsplit(")", 1)[1].split()[0] == "Z"
        sweep = home.pier("sweep")
    finally:
        proc.wait()
    assert sweep.returncode == 0, sweep.stderr
    assert not sandboxes_of(docker_backend, record.trajectory_id), sweep.stdout + sweep.stderr
    assert f"removed {sandbox.id[:12]} (run {record.trajectory_id})" in sweep.stdout
    assert f"ended run {record.trajectory_id}" in sweep.stderr
    assert home.only_run().status == RunStatus.failed


def test_logs_follow_ends_when_the_runs_process_is_gone(home, tmp_path, docker_backend):
    proc, record = held_run(home, tmp_path, "run_agent")
    proc.kill()
    proc.wait()
    follow = home.pier("logs", record.trajectory_id, "--follow", timeout=WAIT_SEC)
    assert follow.returncode == 0, follow.stderr
    last = follow.stdout.splitlines()[-1]
    assert f"pid {proc.pid}" in last and "killed" in last
    assert home.only_run().status == RunStatus.failed
    assert_nothing_left(home, record, docker_backend)


def test_the_next_pier_run_ends_a_killed_run(home, tmp_path, docker_backend):
    proc, record = held_run(home, tmp_path, "run_agent")
    proc.kill()
    proc.wait()
    (tmp_path / "next").mkdir()
    (tmp_path / "next" / "RUNBOOK.md").write_text(runbook("echo ok > {{results_dir}}/ok.txt"))
    following = home.pier("run", str(tmp_path / "next"), "--image", home.image, "--json", timeout=WAIT_SEC)
    assert following.returncode == 0, following.stderr
    assert f"ended run {record.trajectory_id}" in following.stderr
    with home.store() as store:
        killed = store.get_run(record.trajectory_id)
    assert killed.status == RunStatus.failed and killed.error is not None and "killed" in killed.error
    assert_nothing_left(home, killed, docker_backend)


@pytest.mark.parametrize("how", ["SIGINT", "timeout"])
def test_what_the_agent_made_is_kept_on_ctrl_c_as_on_a_timeout(home, tmp_path, docker_backend, how):
    """A timed-out run kept its partial results; one stopped with Ctrl-C lost them."""
    folder = tmp_path / "partial"
    folder.mkdir()
    (folder / "RUNBOOK.md").write_text(
        runbook("echo half-done > {{results_dir}}/partial.txt\necho written\nsleep 600", image=home.image)
    )
    proc = home.start(folder, *(("--timeout", "8") if how == "timeout" else ()))

    def written(record: Trajectory) -> bool:
        with home.store() as store:
            return any("written" in event.line for event in store.events(record.trajectory_id))

    home.wait(proc, written, "the partial result")
    if how == "SIGINT":
        os.kill(proc.pid, signal.SIGINT)
    code = proc.wait(WAIT_SEC)
    assert code == (130 if how == "SIGINT" else 1), (folder / "pier-run.log").read_text()[-2000:]
    ended = home.only_run()
    assert ended is not None and ended.failed_stage == "run_agent", ended
    assert [f.path for f in ended.outputs.results_files] == ["partial.txt"], ended.outputs
    stored = home.path / "storage" / ended.storage_path / "results" / "partial.txt"
    assert stored.read_text() == "half-done\n"
    assert_nothing_left(home, ended, docker_backend)
