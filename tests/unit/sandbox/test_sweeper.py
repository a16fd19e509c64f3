from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pier.sandbox.base import (
    LABEL_CREATED,
    LABEL_DEADLINE,
    LABEL_OWNER,
    LABEL_RUN,
    Limits,
    SandboxInfo,
    SandboxSpec,
)
from pier.sandbox.fake import FAKE_IMAGE, FakeBackend, FakeEngine
from pier.sandbox.owner import owner_alive, owner_label
from pier.sandbox.sweeper import sweep, sweep_reason

NOW = 1_800_000_000.0
GRACE = 300


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def info(running: bool = True, **labels: str) -> SandboxInfo:
    base = {LABEL_RUN: "run-1", LABEL_CREATED: str(int(NOW - 60)), LABEL_OWNER: owner_label()}
    base.update(labels)
    return SandboxInfo(id="c" * 64, labels={k: v for k, v in base.items() if v}, running=running)


def holding(*sandboxes: SandboxInfo) -> tuple[FakeBackend, list[str]]:
    """The shared fake backend (its own engine) with one sandbox per info, carrying
    its labels; and the ids the fake gave them, in order."""
    backend = FakeBackend(engine=FakeEngine())
    specs = [SandboxSpec(image=FAKE_IMAGE, limits=Limits(), labels=dict(i.labels)) for i in sandboxes]
    return backend, [backend.create(spec).id for spec in specs]


def left(backend: FakeBackend) -> list[str]:
    return [s.id for s in backend.list_sandboxes()]


def test_owner_label_names_this_host_and_process():
    host, pid, start = owner_label().rsplit(":", 2)
    assert host == socket.gethostname() and int(pid) == os.getpid()
    assert start.isdigit() or start == "?"


def test_owner_alive():
    assert owner_alive(owner_label()) is True
    assert owner_alive(owner_label(dead_pid())) is False
    assert owner_alive(f"elsewhere.example:{os.getpid()}:1") is None
    assert owner_alive("not a label") is None


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="start times come from /proc")
def test_a_reused_pid_is_not_the_owner():
    host, pid, start = owner_label().rsplit(":", 2)
    assert owner_alive(f"{host}:{pid}:{int(start) + 1}") is False


@pytest.fixture
def zombie_owner_label() -> Iterator[str]:
    """The owner label of a real zombie: a child of this process that has exited
    and that this process has not reaped (waitid with WNOWAIT waits for the exit
    and leaves the child as it is)."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        label = owner_label(child.pid)  # taken while it runs, as a sandbox's label would be
        assert child.stdin is not None
        child.stdin.close()  # the child reads EOF and exits
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        with open(f"/proc/{child.pid}/stat") as stat:
            assert stat.read().rsplit(")", 1)[1].split()[0] == "Z", "the child is not a zombie"
        yield label
    finally:
        child.wait()


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="process states come from /proc")
def test_a_zombie_owner_is_gone(zombie_owner_label):
    assert owner_alive(zombie_owner_label) is False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="process states come from /proc")
def test_a_sandbox_whose_owner_is_a_zombie_is_swept(zombie_owner_label):
    sandbox = info(**{LABEL_OWNER: zombie_owner_label})
    assert sweep_reason(sandbox, "running", NOW, GRACE) == f"its owner process ({zombie_owner_label}) is gone"
    backend, (made,) = holding(sandbox)
    assert [(s.id, s.reason) for s in sweep(backend, {"run-1": "running"}.get, now=NOW)] == [
        (made, f"its owner process ({zombie_owner_label}) is gone")
    ]
    assert left(backend) == []


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled"])
def test_a_finished_run_is_swept(status):
    assert sweep_reason(info(), status, NOW, GRACE) == f"its run is {status}"


def test_a_live_run_with_a_live_owner_is_kept():
    assert sweep_reason(info(), "running", NOW, GRACE) is None
    assert sweep_reason(info(), "pending", NOW, GRACE) is None


def test_past_the_deadline_is_swept_even_when_running():
    sandbox = info(**{LABEL_DEADLINE: str(int(NOW - 10))})
    assert sweep_reason(sandbox, "running", NOW, GRACE) == "it is 10s past its deadline"
    before = info(**{LABEL_DEADLINE: str(int(NOW + 10))})
    assert sweep_reason(before, "running", NOW, GRACE) is None


def test_a_dead_owner_is_swept():
    sandbox = info(**{LABEL_OWNER: owner_label(dead_pid())})
    assert "owner process" in sweep_reason(sandbox, "running", NOW, GRACE)


def test_an_owner_on_another_host_is_left_to_the_other_rules():
    sandbox = info(**{LABEL_OWNER: "elsewhere.example:1:1"})
    assert sweep_reason(sandbox, "running", NOW, GRACE) is None


def test_an_unknown_run_is_swept_only_after_the_grace():
    remote = {LABEL_OWNER: "elsewhere.example:1:1"}  # owner on another host: the store decides
    young = info(**remote)
    old = info(**remote, **{LABEL_CREATED: str(int(NOW - GRACE - 1))})
    assert sweep_reason(young, None, NOW, GRACE) is None
    assert sweep_reason(old, None, NOW, GRACE) == f"its run is unknown to the store ({GRACE + 1}s old)"
    assert sweep_reason(info(**remote, **{LABEL_CREATED: ""}), None, NOW, GRACE).startswith(
        "its run is unknown"
    )


def test_a_live_owner_keeps_a_run_another_store_does_not_know():
    old = info(**{LABEL_CREATED: str(int(NOW - GRACE - 1))})  # owned by this live test process
    assert sweep_reason(old, None, NOW, GRACE) is None


def test_a_stopped_sandbox_is_swept_after_the_grace():
    old = str(int(NOW - GRACE - 1))
    assert sweep_reason(info(running=False), "running", NOW, GRACE) is None
    stopped = info(running=False, **{LABEL_CREATED: old})
    assert sweep_reason(stopped, "running", NOW, GRACE) == "it is not running"


def test_sweep_removes_what_no_live_run_needs_and_says_why():
    keep = info(**{LABEL_RUN: "live"})
    done = SandboxInfo(id="d" * 64, labels={**info().labels, LABEL_RUN: "done"}, running=True)
    orphan = SandboxInfo(
        id="e" * 64, labels={**info().labels, LABEL_RUN: "x", LABEL_OWNER: owner_label(dead_pid())},
        running=True,
    )  # fmt: skip
    backend, (kept, ended, orphaned) = holding(keep, done, orphan)
    statuses = {"live": "running", "done": "completed", "x": "running"}
    swept = sweep(backend, statuses.get, now=NOW, grace_sec=GRACE)
    assert [s.id for s in swept] == [ended, orphaned] and left(backend) == [kept]
    assert (swept[0].trajectory_id, swept[0].reason) == ("done", "its run is completed")
    assert swept[1].trajectory_id == "x" and "owner process" in swept[1].reason


def test_sweep_keeps_what_it_cannot_judge():
    def broken_store(run_id: str) -> str | None:
        raise RuntimeError("database is down")

    backend, made = holding(info(**{LABEL_CREATED: "1"}))
    assert sweep(backend, broken_store, now=NOW) == []
    assert left(backend) == made


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="start times come from /proc")
def test_the_owner_label_survives_exec_into_a_program_with_parentheses_in_its_name(tmp_path):
    """/proc/<pid>/stat names the program in parentheses, and a name may hold
    ") " and spaces itself: the start time is still read from the right field.
    A process keeps its start time across exec, so its label must not change."""
    odd = tmp_path / "x) 1 2 3 4"
    odd.write_bytes(Path(shutil.which("sleep")).read_bytes())
    odd.chmod(0o755)
    program = "import os, sys; sys.stdin.readline(); os.execv(sys.argv[1], [sys.argv[1], '60'])"
    proc = subprocess.Popen([sys.executable, "-c", program, str(odd)], stdin=subprocess.PIPE)
    try:
        before = owner_label(proc.pid)
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while Path(f"/proc/{proc.pid}/comm").read_text().strip() != odd.name:
            assert time.monotonic() < deadline, "the process never ran the oddly named program"
            time.sleep(0.05)
        assert owner_label(proc.pid) == before
        assert owner_alive(before) is True
    finally:
        proc.kill()
        proc.wait()


def test_a_label_without_a_start_time_falls_back_to_the_pid():
    host = socket.gethostname()
    assert owner_alive(f"{host}:{os.getpid()}:?") is True
    assert owner_alive(f"{host}:{dead_pid()}:?") is False


def test_the_grace_and_the_deadline_are_strict_bounds():
    remote = {LABEL_OWNER: "elsewhere.example:1:1"}
    exactly_grace = info(**remote, **{LABEL_CREATED: str(int(NOW - GRACE))})
    assert sweep_reason(exactly_grace, None, NOW, GRACE) is None
    at_deadline = info(**{LABEL_DEADLINE: str(int(NOW))})
    assert sweep_reason(at_deadline, "running", NOW, GRACE) is None


def test_a_sandbox_without_owner_or_created_labels_is_judged_by_the_store():
    bare = info(**{LABEL_OWNER: "", LABEL_CREATED: ""})
    assert sweep_reason(bare, None, NOW, GRACE) == "its run is unknown to the store"
    assert sweep_reason(bare, "running", NOW, GRACE) is None


def test_sweep_defaults_to_now_and_a_five_minute_grace():
    now = time.time()
    remote = {LABEL_OWNER: "elsewhere.example:1:1"}
    older = info(**remote, **{LABEL_RUN: "gone", LABEL_CREATED: str(now - 300.5)})
    younger = SandboxInfo(
        id="y" * 64, labels={**older.labels, LABEL_CREATED: str(int(now - 240))}, running=True
    )
    backend, (old, _young) = holding(older, younger)
    assert [s.id for s in sweep(backend, lambda _run: None)] == [old]


def test_sweep_judges_at_the_time_it_is_given():
    later = time.time() + 10 * 86400
    due = info(**{LABEL_DEADLINE: str(int(later - 3600))})
    backend, made = holding(due)
    assert [s.id for s in sweep(backend, lambda _run: "running", now=later, grace_sec=GRACE)] == made
    assert sweep(holding(due)[0], lambda _run: "running", grace_sec=GRACE) == []


def test_a_sandbox_with_no_run_label_needs_no_store_lookup():
    asked: list = []

    def lookup(run_id):
        asked.append(run_id)
        if run_id is None:
            raise AssertionError("looked up a run with no id")
        return None

    remote = {LABEL_OWNER: "elsewhere.example:1:1", LABEL_CREATED: str(int(NOW - GRACE - 1))}
    backend, _ = holding(info(**remote, **{LABEL_RUN: ""}))
    swept = sweep(backend, lookup, now=NOW, grace_sec=GRACE)
    assert asked == [] and [(s.trajectory_id, s.reason) for s in swept] == [
        (None, f"its run is unknown to the store ({GRACE + 1}s old)")
    ]


def test_one_run_the_store_cannot_judge_does_not_stop_the_sweep(caplog):
    def flaky(run_id: str) -> str | None:
        if run_id == "first":
            raise RuntimeError("database hiccup")
        return "completed"

    first = info(**{LABEL_RUN: "first"})
    second = SandboxInfo(id="f" * 64, labels={**info().labels, LABEL_RUN: "second"}, running=True)
    backend, (kept, removed) = holding(first, second)
    with caplog.at_level(logging.INFO, logger="pier.sandbox.sweeper"):
        swept = sweep(backend, flaky, now=NOW, grace_sec=GRACE)
    assert left(backend) == [kept]
    assert [(s.id, s.trajectory_id, s.reason) for s in swept] == [(removed, "second", "its run is completed")]
    assert caplog.messages == [
        "sweep: status of run first unavailable (database hiccup); keeping it",
        f"sweep: removing sandbox {removed[:12]} of run second: its run is completed",
    ]
