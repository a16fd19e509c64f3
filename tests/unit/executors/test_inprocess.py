"""The in-process executor with the lifecycle replaced by fakes: bounds, order,
cancel (pending and running), stop, and hooks that fail."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from pier.executors import inprocess
from pier.executors.inprocess import InProcessExecutor, Job
from pier.record import RunStatus, Trajectory


class Hooks:
    def __init__(self, fail_context: set[str] | None = None, fail_ended: bool = False):
        self.lock = threading.Lock()
        self.started: list[str] = []
        self.finished: list[tuple[str, RunStatus | None, BaseException | None]] = []
        self.cancelled_waiting: list[str] = []
        self.release: dict[str, threading.Event] = {}
        self.fail_context = fail_context or set()
        self.fail_ended = fail_ended
        self.saved: list[str] = []
        self.running = 0
        self.most = 0  # the most runs executing at once

    def context(self, job: Job):
        if job.trajectory_id in self.fail_context:
            raise RuntimeError("no context")
        record = Trajectory.new(job.trajectory_id, "c", "t")
        with self.lock:
            self.release.setdefault(job.trajectory_id, threading.Event())
        return SimpleNamespace(
            record=record, cancel=threading.Event(), save_record=lambda r: self.saved.append(r.trajectory_id)
        )

    def ended(self, job, record, error):
        with self.lock:
            self.finished.append((job.trajectory_id, record.status if record else None, error))
        if self.fail_ended:
            raise RuntimeError("ended hook broke")

    def cancelled_before_start(self, job):
        self.cancelled_waiting.append(job.trajectory_id)


@pytest.fixture
def hooks(monkeypatch):
    hooks = Hooks()

    def execute(ctx):
        with hooks.lock:
            hooks.started.append(ctx.record.trajectory_id)
            release = hooks.release[ctx.record.trajectory_id]
            hooks.running += 1
            hooks.most = max(hooks.most, hooks.running)
        try:
            while not release.wait(0.01):
                if ctx.cancel.is_set():
                    ctx.record.status = RunStatus.cancelled
                    return ctx.record
            ctx.save_record(ctx.record)
            ctx.record.status = RunStatus.completed
            return ctx.record
        finally:
            with hooks.lock:
                hooks.running -= 1

    monkeypatch.setattr(inprocess, "execute", execute)
    monkeypatch.setattr(inprocess, "cancel_run", lambda ctx: ctx.cancel.set())
    return hooks


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_runs_at_most_max_workers_in_submission_order(hooks):
    executor = InProcessExecutor(hooks, max_workers=2)
    executor.start()
    for n in range(6):
        executor.submit(Job(f"r{n}"))
    wait_for(lambda: len(hooks.started) == 2)
    assert sorted(hooks.started) == ["r0", "r1"] and executor.pending() == ["r2", "r3", "r4", "r5"]
    for n in range(6):
        wait_for(lambda n=n: f"r{n}" in hooks.release)
        hooks.release[f"r{n}"].set()
        wait_for(lambda n=n: any(e[0] == f"r{n}" for e in hooks.finished))
        assert len(executor.running()) <= 2
    assert hooks.started[2:] == ["r2", "r3", "r4", "r5"]
    assert hooks.most == 2, "never more than max_workers at once"
    assert {status for _, status, _ in hooks.finished} == {RunStatus.completed}


def test_cancel_pending_never_starts_and_cancel_running_stops(hooks):
    executor = InProcessExecutor(hooks, max_workers=1)
    executor.start()
    executor.submit(Job("first"))
    executor.submit(Job("second"))
    wait_for(lambda: hooks.started == ["first"])
    assert executor.cancel("second") == "pending"
    assert hooks.cancelled_waiting == ["second"] and executor.pending() == []
    assert executor.cancel("first") == "running"
    wait_for(lambda: hooks.finished)
    assert hooks.finished == [("first", RunStatus.cancelled, None)]
    assert executor.cancel("first") is None and executor.cancel("unknown") is None
    assert hooks.started == ["first"]


def test_a_run_without_context_ends_with_the_error_and_the_worker_goes_on(monkeypatch, hooks):
    hooks.fail_context = {"broken"}
    hooks.fail_ended = True  # the worker survives a failing hook too
    executor = InProcessExecutor(hooks, max_workers=1)
    executor.start()
    executor.submit(Job("broken"))
    executor.submit(Job("fine"))
    wait_for(lambda: "fine" in hooks.release)
    hooks.release["fine"].set()
    wait_for(lambda: len(hooks.finished) == 2)
    (tid, record, error), second = hooks.finished
    assert tid == "broken" and record is None and "no context" in str(error)
    assert second[:2] == ("fine", RunStatus.completed)


def test_stop_interrupts_running_keeps_pending_and_drops_late_saves(hooks):
    executor = InProcessExecutor(hooks, max_workers=1)
    executor.start()
    executor.submit(Job("busy"))
    executor.submit(Job("waiting"))
    wait_for(lambda: hooks.started == ["busy"])
    interrupted = []
    assert executor.stop(interrupt=lambda ctx: interrupted.append(ctx.record.trajectory_id)) == ["waiting"]
    assert interrupted == ["busy"]
    hooks.release["busy"].set()
    executor.join(5)
    assert hooks.saved == [] and hooks.finished == []  # what interrupt recorded stays
    with pytest.raises(RuntimeError, match="stopped"):
        executor.submit(Job("late"))


def test_record_saves_of_different_runs_do_not_wait_on_each_other(hooks):
    """Two runs' saves are in flight at once: each save waits (a barrier) until the
    other has started, which a lock shared by every run's saves would never allow."""
    barrier = threading.Barrier(2, timeout=10)
    broken: list[BaseException] = []

    def save(record):
        try:
            barrier.wait()
        except threading.BrokenBarrierError as exc:
            broken.append(exc)
        hooks.saved.append(record.trajectory_id)

    original = hooks.context

    def context(job):
        ctx = original(job)
        ctx.save_record = save
        return ctx

    hooks.context = context
    executor = InProcessExecutor(hooks, max_workers=2)
    executor.start()
    for name in ("a", "b"):
        executor.submit(Job(name))
        hooks.release.setdefault(name, threading.Event()).set()
    wait_for(lambda: len(hooks.finished) == 2, timeout=15)
    executor.stop()
    assert broken == [] and sorted(hooks.saved) == ["a", "b"]


def test_a_save_in_flight_finishes_before_stop_returns(hooks):
    """stop() waits for a save under way, and drops those that come after."""
    in_save, release = threading.Event(), threading.Event()

    def slow_save(record):
        in_save.set()
        release.wait(10)
        hooks.saved.append(record.trajectory_id)

    original = hooks.context

    def context(job):
        ctx = original(job)
        ctx.save_record = slow_save
        return ctx

    hooks.context = context
    executor = InProcessExecutor(hooks, max_workers=1)
    executor.start()
    executor.submit(Job("slow"))
    hooks.release.setdefault("slow", threading.Event()).set()
    assert in_save.wait(10)
    stopping = threading.Thread(target=executor.stop)
    stopping.start()
    stopping.join(0.3)
    assert stopping.is_alive(), "stop() returned while a save was in flight"
    release.set()
    stopping.join(10)
    assert not stopping.is_alive() and hooks.saved == ["slow"]


def job_of(collection: str, tid: str) -> Job:
    return Job(tid, SimpleNamespace(collection=collection))


def test_a_backlog_of_one_collection_does_not_hold_up_another(hooks):
    """200 runs of collection a queued first; b's run takes the next free slot
    (served in turn), not the 201st. Before: first come, first served."""
    executor = InProcessExecutor(hooks, max_workers=2)
    executor.start()
    executor.submit(job_of("a", "a0"))
    executor.submit(job_of("a", "a1"))
    wait_for(lambda: len(hooks.started) == 2)  # both slots busy with a's runs
    for n in range(2, 200):
        executor.submit(job_of("a", f"a{n}"))
    executor.submit(job_of("b", "b0"))
    hooks.release["a0"].set()  # one slot frees
    wait_for(lambda: len(hooks.started) == 3)
    assert hooks.started[2] == "b0"
    for tid in list(hooks.release):
        hooks.release[tid].set()
    executor.stop()


def test_a_collection_at_its_quota_of_runs_at_once_leaves_the_slots_to_others(hooks):
    executor = InProcessExecutor(hooks, max_workers=3, concurrency=lambda c: 1 if c == "a" else None)
    executor.start()
    for n in range(5):
        executor.submit(job_of("a", f"a{n}"))
    wait_for(lambda: len(hooks.started) == 1)
    time.sleep(0.2)
    assert hooks.started == ["a0"], "a runs more than its quota at once"
    executor.submit(job_of("b", "b0"))
    executor.submit(job_of("b", "b1"))
    wait_for(lambda: len(hooks.started) == 3)
    assert sorted(hooks.started[1:]) == ["b0", "b1"]
    hooks.release["a0"].set()
    wait_for(lambda: len(hooks.started) == 4)
    assert hooks.started[3] == "a1"
    for tid in list(hooks.release):
        hooks.release[tid].set()
    executor.stop()
