"""A fleet's claim of a kept sandbox: two runs that continue from the same kept
run at once, in two processes (two workers: no lock of one process holds the
other back), on SQLite and on PostgreSQL. Exactly one gets the sandbox; the
other is refused as "in use" (docs/sessions.md)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
import uuid
from types import SimpleNamespace

import pytest

from pier.db import Store
from pier.errors import StageError
from pier.lifecycle.sessions import claim_kept
from pier.record import RunStatus, Trajectory

FORK = multiprocessing.get_context("fork")


class Backend:
    """Both claimants reach the engine before either writes its claim: the
    barrier holds each in `attach` until the other is there too (or 5 s)."""

    def __init__(self, barrier) -> None:
        self.barrier = barrier

    def paused(self, sandbox_id: str) -> bool:
        return False

    def attach(self, sandbox_id: str) -> object:
        with contextlib.suppress(threading.BrokenBarrierError):  # the other is not coming: go on alone
            self.barrier.wait(timeout=5)
        return SimpleNamespace(id=sandbox_id)


def claimant(url: str, parent_id: str, barrier, answers, answered=None) -> None:
    trajectory_id = uuid.uuid4().hex
    with Store.open(url) as store:
        plan = SimpleNamespace(continue_from=parent_id, collection="c")
        ctx = SimpleNamespace(
            require_plan=lambda: plan,
            store=store,
            backend=Backend(barrier),
            record=Trajectory.new(trajectory_id, "c", "t"),
            image=None,
            log=lambda line, stage=None: None,
        )
        try:
            claim_kept(ctx)
            answers.put((trajectory_id, "claimed"))
        except StageError as exc:
            answers.put((trajectory_id, str(exc)))
        finally:
            if answered is not None:
                answered.set()


def test_two_runs_continuing_from_one_kept_sandbox_at_once_exactly_one_gets_it(store_url):
    with Store.open(store_url) as store:  # migrated before the claimants open it
        parent = Trajectory.new(uuid.uuid4().hex, "c", "t")
        parent.status = RunStatus.completed
        parent.outputs.sandbox.id = "s" * 64
        parent.outputs.sandbox.kept_until = time.time() + 600
        store.create_run(parent)
    barrier, answers = FORK.Barrier(2), FORK.Queue()
    workers = [FORK.Process(target=claimant, args=(store_url, parent.trajectory_id, barrier, answers))
               for _ in range(2)]  # fmt: skip
    for worker in workers:
        worker.start()
    got = dict(answers.get(timeout=60) for _ in workers)
    for worker in workers:
        worker.join(timeout=30)
    winners = [tid for tid, said in got.items() if said == "claimed"]
    assert len(winners) == 1, f"both runs claimed the kept sandbox: {got}"
    (loser,) = set(got) - set(winners)
    assert f"in use by run {winners[0]}" in got[loser]
    with Store.open(store_url) as store:
        assert store.get_run(parent.trajectory_id, "c").outputs.sandbox.continued_by == winners[0]


@pytest.fixture
def stored(store):
    record = Trajectory.new(uuid.uuid4().hex, "c", "t")
    store.create_run(record)
    return record


def test_swap_run_writes_only_over_the_version_it_read(store, stored):
    first, seen = store.get_run_seen(stored.trajectory_id, "c")
    second, _ = store.get_run_seen(stored.trajectory_id, "c")
    first.error, second.error = "one", "two"
    assert store.swap_run(first, seen) is True
    assert store.swap_run(second, seen) is False, "a write over a version another write replaced"
    assert store.get_run(stored.trajectory_id, "c").error == "one"


class PausingBackend(Backend):
    """The same barrier in `attach`, and a pause that is counted (a file per call)
    and lasts until the claimant has its answer: a pause that let go first would
    leave the claimant's next try a free sandbox (one after the other, not at once)."""

    def __init__(self, barrier, marks: str, answered) -> None:
        super().__init__(barrier)
        self.marks, self.answered = marks, answered

    def pause(self, sandbox_id: str) -> None:
        with open(self.marks, "a") as marks:
            marks.write("paused\n")
        self.answered.wait(timeout=30)


def pauser(url: str, parent_id: str, barrier, answers, marks: str, answered) -> None:
    from pier.errors import InputError
    from pier.lifecycle.sessions import pause_kept

    with Store.open(url) as store:
        try:
            pause_kept(store, PausingBackend(barrier, marks, answered), "c", parent_id, pause=True)
            answers.put(("pause", "claimed"))
        except InputError as exc:
            answers.put(("pause", str(exc)))


def test_a_pause_and_a_run_continuing_at_once_exactly_one_gets_the_sandbox(store_url, tmp_path):
    with Store.open(store_url) as store:
        parent = Trajectory.new(uuid.uuid4().hex, "c", "t")
        parent.status = RunStatus.completed
        parent.outputs.sandbox.id = "s" * 64
        parent.outputs.sandbox.kept_until = time.time() + 600
        store.create_run(parent)
    barrier, answers, marks = FORK.Barrier(2), FORK.Queue(), str(tmp_path / "paused")
    answered = FORK.Event()
    workers = [FORK.Process(target=claimant, args=(store_url, parent.trajectory_id, barrier, answers, answered)),
               FORK.Process(target=pauser, args=(store_url, parent.trajectory_id, barrier, answers, marks, answered))]  # fmt: skip
    for worker in workers:
        worker.start()
    got = dict(answers.get(timeout=60) for _ in workers)
    for worker in workers:
        worker.join(timeout=30)
    winners = [who for who, said in got.items() if said == "claimed"]
    assert len(winners) == 1, f"a pause and a continuing run both had the kept sandbox: {got}"
    (loser,) = set(got) - set(winners)
    with Store.open(store_url) as store:
        after = store.get_run(parent.trajectory_id, "c").outputs.sandbox.continued_by
    paused = os.path.exists(marks)
    if winners == ["pause"]:  # the run was refused while the pause held it, and the pause let go after
        assert "another command is at its sandbox (pause)" in got[loser] and paused and after is None
    else:
        assert "in use by run" in got[loser] and not paused and after == winners[0]
