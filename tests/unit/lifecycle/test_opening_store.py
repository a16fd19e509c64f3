"""A store opened in a thread (pier.lifecycle.opening): the run's writes made
meanwhile land in order and as they were made; a failed opening is raised to
the calls that follow."""

from __future__ import annotations

import threading

import pytest

from pier.errors import PierError
from pier.lifecycle.opening import OpeningStore
from pier.record import RunStatus, Trajectory


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def create_run(self, record: Trajectory) -> None:
        self.calls.append(("create_run", record.status))

    def save_run(self, record: Trajectory) -> bool:
        self.calls.append(("save_run", record.status))
        return True

    def append_event(self, trajectory_id: str, line: str, stage: str | None = None) -> int:
        self.calls.append(("append_event", line, stage))
        return len(self.calls)

    def get_run(self, trajectory_id: str) -> str:
        return f"read {trajectory_id} after {len(self.calls)} writes"


def test_writes_made_while_it_opens_land_in_order_as_they_were():
    may_open = threading.Event()
    recorder = Recorder()
    store = OpeningStore(lambda: (may_open.wait(10), recorder)[1])
    record = Trajectory.new("a" * 32, "local", "t")
    store.create_run(record)
    record.status = RunStatus.running
    store.save_run(record)
    store.append_event(record.trajectory_id, "line 1", "prepare")
    record.status = RunStatus.completed  # the runner goes on changing the same object
    assert recorder.calls == []  # nothing written before the store is open
    may_open.set()
    assert store.get_run(record.trajectory_id) == f"read {record.trajectory_id} after 3 writes"
    store.append_event(record.trajectory_id, "line 2", "save")  # open now: written at once
    assert recorder.calls == [
        ("create_run", RunStatus.pending),
        ("save_run", RunStatus.running),
        ("append_event", "line 1", "prepare"),
        ("append_event", "line 2", "save"),
    ]
    assert store.save_run(record) is True  # once open, a call answers as the store does


def test_an_opening_that_fails_is_raised_to_the_calls_that_follow():
    def broken() -> Recorder:
        raise PierError("the database cannot be opened")

    store = OpeningStore(broken)
    with pytest.raises(PierError, match="cannot be opened"):
        store.settle()
    with pytest.raises(PierError, match="cannot be opened"):
        store.save_run(Trajectory.new("b" * 32, "local", "t"))
    with pytest.raises(PierError, match="cannot be opened"):
        store.get_run("b" * 32)
