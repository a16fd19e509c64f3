"""A run's log lines are gathered into few store writes: the first after a quiet
spell at once, the rest of a window's lines in one write, in order, each handed
to the live view once stored; a write that fails in the background is raised in
the run's thread."""

from __future__ import annotations

import threading
import time

import pytest

from pier.lifecycle.logwriter import RunLogWriter


class Store:
    def __init__(self, fail: bool = False):
        self.writes: list[tuple[str, list[str]]] = []
        self.fail = fail
        self.lock = threading.Lock()

    def write(self, lines: list[str], stage: str) -> None:
        if self.fail:
            raise OSError("the database is gone")
        with self.lock:
            self.writes.append((stage, list(lines)))

    def lines(self) -> list[str]:
        return [line for _stage, lines in self.writes for line in lines]


def test_the_first_line_is_written_at_once_and_a_flood_in_few_writes():
    store, seen = Store(), []
    writer = RunLogWriter(store.write, stored=lambda stage, line: seen.append(line), window=0.05)
    writer("run_agent", "first line")
    assert store.writes == [("run_agent", ["first line"])] and seen == ["first line"]  # not held back
    began = time.monotonic()
    for n in range(5000):
        writer("run_agent", f"line {n}")
    writer.flush()
    took = time.monotonic() - began
    assert (
        store.lines() == ["first line", *(f"line {n}" for n in range(5000))] == seen
    )  # every line, in order
    # one write per window at the most (plus the flush): a line each was 5001
    assert len(store.writes) <= 3 + took / 0.05, (len(store.writes), took)


def test_lines_left_in_a_window_are_written_when_it_ends():
    store = Store()
    writer = RunLogWriter(store.write, window=0.05)
    writer("setup", "a")
    writer("setup", "b")
    assert store.lines() == ["a"]
    deadline = time.monotonic() + 5
    while store.lines() != ["a", "b"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.lines() == ["a", "b"]


def test_each_stage_keeps_its_own_lines():
    store = Store()
    writer = RunLogWriter(store.write, window=10)
    writer("setup", "placed")
    writer("setup", "probed")
    writer("run_agent", "starting agent script")
    writer("setup", "late")
    writer.flush()
    assert store.writes == [
        ("setup", ["placed"]), ("setup", ["probed"]), ("run_agent", ["starting agent script"]), ("setup", ["late"])
    ]  # fmt: skip


def test_a_write_failing_in_the_background_is_raised_at_the_next_line():
    store = Store()
    writer = RunLogWriter(store.write, window=0.05)
    writer("run_agent", "one")
    store.fail = True
    writer("run_agent", "two")  # gathered; the window's write fails in the timer's thread
    time.sleep(0.3)
    with pytest.raises(OSError, match="the database is gone"):
        writer("run_agent", "three")


def test_lines_from_many_threads_are_all_stored_once():
    store = Store()
    writer = RunLogWriter(store.write, window=0.01)

    def say(who: int) -> None:
        for n in range(300):
            writer("run_agent", f"{who}:{n}")

    threads = [threading.Thread(target=say, args=(who,)) for who in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.flush()
    lines = store.lines()
    assert sorted(lines) == sorted(f"{who}:{n}" for who in range(4) for n in range(300))
    for who in range(4):  # each thread's lines in the order it said them
        own = [int(line.split(":")[1]) for line in lines if line.startswith(f"{who}:")]
        assert own == sorted(own)
