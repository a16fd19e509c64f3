"""Ending runs whose owner is gone, on a real SQLite store with real processes:
a live owner (this test), a dead one (a reaped child), a zombie (an unreaped one)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from pier.db import Store
from pier.lifecycle.context import scratch_dir
from pier.lifecycle.orphans import end_orphaned_runs, owner_gone
from pier.record import ActivityOutputs, RunStatus, StageStatus, Step, Trajectory
from pier.sandbox.base import LABEL_RUN, SandboxBackend, SandboxInfo
from pier.sandbox.owner import owner_label
from pier.server.recovery import TAKEN_OVER, abandoned_at_start, take_over_workflows
from pier.settings import Settings


def dead_label() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    label = owner_label(child.pid)
    child.wait()
    return label


@pytest.fixture
def zombie_label() -> Iterator[str]:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    label = owner_label(child.pid)
    assert child.stdin is not None
    child.stdin.close()
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    yield label
    child.wait()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'pier.db'}") as opened:
        yield opened


def add(store: Store, tid: str, owner: str | None, status: RunStatus = RunStatus.running) -> None:
    record = Trajectory.new(tid, "local", "task", owner=owner, status=status)
    if status == RunStatus.running:
        record.stage("prepare").status = StageStatus.completed
        record.stage("create").status = StageStatus.running
    store.create_run(record)


class FakeBackend(SandboxBackend):
    name = "fake"

    def __init__(self, runs: list[str]):
        self.sandboxes = [SandboxInfo(id=f"sb-{r}", labels={LABEL_RUN: r}, running=True) for r in runs]
        self.removed: list[str] = []

    def list_sandboxes(self) -> list[SandboxInfo]:
        return self.sandboxes

    def remove(self, sandbox_id: str) -> None:
        self.removed.append(sandbox_id)

    ensure_image = image_exists = create = attach = ping = None  # type: ignore[assignment]


def test_runs_whose_owner_is_dead_or_a_zombie_end_failed_with_their_files(store, tmp_path, zombie_label):
    settings = Settings(home=tmp_path / "home")
    add(store, "live", owner_label())
    add(store, "dead", dead_label())
    add(store, "zombie", zombie_label)
    add(store, "waiting", dead_label(), status=RunStatus.pending)  # a `pier run` killed before it started
    add(store, "server-queued", None, status=RunStatus.pending)  # the API's, waiting for a server
    add(store, "elsewhere", "other.example:1:1")
    for tid in ("dead", "zombie"):
        (scratch_dir(settings, tid) / "assets.tar").parent.mkdir(parents=True)
        (scratch_dir(settings, tid) / "assets.tar").write_bytes(b"x")
    backend = FakeBackend(["live", "dead", "zombie"])

    ended = end_orphaned_runs(store, settings, lambda: backend)

    assert sorted(r.trajectory_id for r in ended) == ["dead", "waiting", "zombie"]
    for tid in ("dead", "zombie", "waiting"):
        record = store.get_run(tid)
        assert record.status == RunStatus.failed and record.success is False
        assert record.error is not None and "`pier run` process" in record.error
        assert "killed" in record.error and "run it again" in record.error
        assert store.events(tid)[-1].line == record.error
        assert not scratch_dir(settings, tid).exists()
    assert store.get_run("dead").failed_stage == "create"
    assert {tid: store.get_run(tid).status for tid in ("live", "server-queued", "elsewhere")} == {
        "live": RunStatus.running,
        "server-queued": RunStatus.pending,
        "elsewhere": RunStatus.running,
    }
    assert sorted(backend.removed) == ["sb-dead", "sb-zombie"]
    live = store.get_run("live")
    assert live.owner == owner_label(), "the store keeps the owner"
    assert "owner" not in live.model_dump_json(), "records printed or served do not show it"


def test_a_server_run_says_the_server_stopped(store, tmp_path):
    record = Trajectory.new("api-run", "local", "task", owner=dead_label(), status=RunStatus.running)
    store.enqueue_run(record, {"collection": "local"})
    store.save_run(record)
    end_orphaned_runs(store, Settings(home=tmp_path))
    assert store.get_run("api-run").error == "the server stopped while this run was running; run it again"


def test_the_start_up_judgement():
    def record(owner, status=RunStatus.running):
        return Trajectory.new("r", "c", "t", owner=owner, status=status)

    assert abandoned_at_start(record(owner_label())) is False  # a live `pier run` on the same home
    assert abandoned_at_start(record(dead_label())) is True
    assert abandoned_at_start(record(None)) is True  # an older server's run
    assert abandoned_at_start(record("other.example:1:1")) is True  # one server per store
    assert abandoned_at_start(record(None, RunStatus.pending)) is False  # re-queued instead
    assert abandoned_at_start(record(owner_label(), RunStatus.pending)) is False
    assert abandoned_at_start(record(dead_label(), RunStatus.pending)) is True
    assert owner_gone(record(None)) is False and owner_gone(record(dead_label())) is True


def workflow_run(tid: str, owner: str | None, fan_started: list[str]) -> Trajectory:
    record = Trajectory.new(tid, "local", "wf", owner=owner, status=RunStatus.running)
    record.steps = {
        "first": Step(activity="text_echo", key="first", status=StageStatus.completed,
                      outputs=ActivityOutputs(text="kept")),
        "fan": Step(activity="list_emit_await", key="fan", status=StageStatus.running,
                    outputs=ActivityOutputs(started=[{"index": i, "trajectory_id": t}
                                                     for i, t in enumerate(fan_started)])),
    }  # fmt: skip
    record.total_steps = ["first", "fan"]
    return record


def child_run(tid: str, parent: str, status: RunStatus, owner: str | None) -> Trajectory:
    record = Trajectory.new(tid, "local", "nap", owner=owner, status=status, parent_trajectory_id=parent)
    if status.terminal:
        record.ended = record.created
    return record


def test_a_server_s_workflow_run_is_taken_over_and_its_lost_children_let_go(store, tmp_path):
    """The previous server's workflow run goes back to pending (the start
    re-queues it) with its completed steps; its fan-out's children that had not
    ended end failed as lost and leave the fan-out's record, so their items
    start again; the ended one stays. A runbook run, a `pier run`'s workflow
    and a live owner's are judged as before."""
    settings = Settings(home=tmp_path / "home")
    dead = dead_label()
    wf = workflow_run("wf", dead, ["done", "running", "waiting"])
    store.enqueue_run(wf, {"collection": "local"})
    store.save_run(wf)
    for child in (
        child_run("done", "wf", RunStatus.completed, dead),
        child_run("running", "wf", RunStatus.running, dead),
        child_run("waiting", "wf", RunStatus.pending, None),  # waiting for a run slot
        child_run("unnoted", "wf", RunStatus.running, dead),  # started, not yet in the parent's record
    ):
        store.create_run(child)
    cli_wf = workflow_run("cli-wf", dead, [])  # a `pier run`'s: no kept request
    store.create_run(cli_wf)
    live_wf = workflow_run("live-wf", owner_label(), [])
    store.enqueue_run(live_wf, {"collection": "local"})
    store.save_run(live_wf)
    runbook = Trajectory.new("runbook", "local", "task", owner=dead, status=RunStatus.running)
    store.enqueue_run(runbook, {"collection": "local"})
    store.save_run(runbook)

    dispatcher = SimpleNamespace(store=store, services=SimpleNamespace(settings=settings))
    assert take_over_workflows(dispatcher) == ["wf"]  # type: ignore[arg-type]

    taken = store.get_run("wf")
    assert taken.status == RunStatus.pending and taken.owner is None
    assert (
        taken.steps["first"].status == StageStatus.completed and taken.steps["first"].outputs.text == "kept"
    )
    assert taken.steps["fan"].outputs.model_dump()["started"] == [{"index": 0, "trajectory_id": "done"}]
    assert TAKEN_OVER in [e.line for e in store.events("wf")]
    assert store.get_run("done").status == RunStatus.completed
    for tid in ("running", "waiting", "unnoted"):
        lost = store.get_run(tid)
        assert lost.status == RunStatus.failed, tid
        assert lost.error == "the server running its parent wf was lost; the fan-out started this item again"
    assert store.get_run("live-wf").status == RunStatus.running
    for tid in ("cli-wf", "runbook"):  # left to end_orphaned_runs: failed
        assert store.get_run(tid).status == RunStatus.running
    ended = {r.trajectory_id for r in end_orphaned_runs(store, settings, judge=abandoned_at_start)}
    assert ended == {"cli-wf", "runbook"}
