"""A run stopped by a signal in the process running it (Ctrl-C, kill, a closed
terminal) ends cancelled, saying why, with its sandbox and scratch files gone.
The stages here are stand-ins; tests/integration/test_run_faults.py sends real
signals to real `pier run` processes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pier.lifecycle import runner
from pier.lifecycle.context import RunContext, scratch_dir
from pier.lifecycle.interrupts import Interrupted
from pier.lifecycle.runner import execute
from pier.record import RunStatus, StageStatus, Trajectory
from pier.sandbox.base import LABEL_RUN, SandboxInfo
from pier.settings import Settings


class FakeSandbox:
    id = "f" * 64

    def __init__(self) -> None:
        self.deleted = 0

    def delete(self) -> None:
        self.deleted += 1


class FakeBackend:
    """Lists one sandbox of the run that the context never got (as when a signal
    lands inside the engine's create call)."""

    runtime = None  # as SandboxBackend's: the runtime is not told

    def __init__(self) -> None:
        self.removed: list[str] = []

    def list_sandboxes(self) -> list[SandboxInfo]:
        return [SandboxInfo(id="stray", labels={LABEL_RUN: "run-1"}, running=True),
                SandboxInfo(id="other", labels={LABEL_RUN: "run-2"}, running=True)]  # fmt: skip

    def remove(self, sandbox_id: str) -> None:
        self.removed.append(sandbox_id)


def context(tmp_path: Path, saved: list[Trajectory]) -> RunContext:
    return RunContext(
        task=None,  # type: ignore[arg-type] - the stand-in stages need none of these
        run_params={},
        inputs=None,  # type: ignore[arg-type]
        record=Trajectory.new("run-1", "local", "task"),
        settings=Settings(home=tmp_path / "home"),
        backend=FakeBackend(),  # type: ignore[arg-type]
        output_dir=tmp_path / "out",
        emit=lambda _stage, _line: None,
        save_record=lambda record: saved.append(record.model_copy(deep=True)),
    )


@pytest.fixture
def stages(monkeypatch: pytest.MonkeyPatch):
    """Replace the run's stages: create makes a sandbox and a scratch file, and
    run_agent does what the test says."""

    def use(agent):
        def create(ctx: RunContext) -> None:
            ctx.sandbox = FakeSandbox()  # type: ignore[assignment]
            (ctx.scratch() / "assets.tar").write_bytes(b"x" * 1024)

        plan = [("prepare", lambda ctx: None), ("create", create), ("run_agent", agent),
                ("collect", lambda ctx: None), ("save", lambda ctx: None)]  # fmt: skip
        monkeypatch.setattr(runner, "STAGES", tuple(plan))

    return use


@pytest.mark.parametrize(
    ("stop", "reason"),
    [
        (KeyboardInterrupt, "SIGINT (Ctrl-C)"),
        (lambda: Interrupted(signal.SIGTERM), "SIGTERM (it was asked to stop)"),
        (lambda: Interrupted(signal.SIGHUP), "SIGHUP (its terminal closed)"),
    ],
    ids=["SIGINT", "SIGTERM", "SIGHUP"],
)
def test_an_interrupted_run_is_cancelled_with_the_reason_and_cleaned_up(tmp_path, stages, stop, reason):
    def agent(ctx: RunContext) -> None:
        raise stop()

    stages(agent)
    saved: list[Trajectory] = []
    ctx = context(tmp_path, saved)
    with pytest.raises(BaseException) as raised:
        execute(ctx)
    assert isinstance(raised.value, KeyboardInterrupt | Interrupted), "the interruption goes on up"
    record = saved[-1]
    assert record.status == RunStatus.cancelled and record.success is False
    assert record.error is not None and record.failed_stage == "run_agent"
    assert record.error == f"the run was interrupted: pier received {reason}"
    steps = {s.name: s.status for s in record.stages}
    assert steps["run_agent"] == StageStatus.failed and steps["collect"] == StageStatus.skipped
    assert ctx.sandbox.deleted == 1  # type: ignore[union-attr]
    assert ctx.backend.removed == ["stray"], "a sandbox the context never got was left"  # type: ignore[attr-defined]
    assert not scratch_dir(ctx.settings, "run-1").exists(), "the scratch files were left"


def test_a_run_records_its_owner(tmp_path, stages):
    stages(lambda ctx: None)
    saved: list[Trajectory] = []
    execute(context(tmp_path, saved))
    _host, pid, _start = saved[0].owner.rsplit(":", 2)
    assert int(pid) == os.getpid() and saved[0].status == RunStatus.running
    assert saved[-1].status == RunStatus.completed
