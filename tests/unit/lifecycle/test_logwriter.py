"""A run's log lines are gathered into few store writes with no delay added:
a line is written at once when no write is under way; the lines said while one
is go in the next write, together, in order; each is handed to the live view
once stored; a failed write is raised in the run's thread."""

from __future__ import annotations

import threading

import pytest

from pier.lifecycle.logwriter import RunLogWriter


class Store:
    def __init__(self):
        self.writes: list[tuple[str, list[str]]] = []
        self.fail = False
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()

    def write(self, lines: list[str], stage: str) -> None:
        self.entered.set()
        assert self.hold.wait(30), "the test never released the write"
        if self.fail:
            raise OSError("the database is gone")
        self.writes.append((stage, list(lines)))

    def lines(self) -> list[str]:
        return [line for _stage, lines in self.writes for line in lines]


def test_a_line_is_written_at_once_and_those_said_during_a_write_go_in_the_next_together():
    store, seen = Store(), []
    writer = RunLogWriter(store.write, stored=lambda stage, line: seen.append(line))
    store.hold.clear()  # the first write takes as long as the test wants
    writer("run_agent", "first line")
    assert store.entered.wait(30)  # being written now, not held for a window
    for n in range(1000):
        writer("run_agent", f"line {n}")
    store.hold.set()
    writer.flush()
    assert store.writes == [("run_agent", ["first line"]), ("run_agent", [f"line {n}" for n in range(1000)])]
    assert seen == store.lines()  # each handed on once stored, in order
    assert writer.writes == 2


def test_flush_waits_for_every_line_said():
    store = Store()
    writer = RunLogWriter(store.write)
    for n in range(50):
        writer("setup", str(n))
    writer.flush()
    assert store.lines() == [str(n) for n in range(50)]


def test_each_stage_keeps_its_own_lines():
    store = Store()
    writer = RunLogWriter(store.write)
    store.hold.clear()
    writer("setup", "placed")
    assert store.entered.wait(30)
    writer("setup", "probed")
    writer("run_agent", "starting agent script")
    writer("setup", "late")
    store.hold.set()
    writer.flush()
    assert store.writes == [
        ("setup", ["placed"]), ("setup", ["probed"]), ("run_agent", ["starting agent script"]), ("setup", ["late"])
    ]  # fmt: skip


def test_a_failed_write_is_raised_in_the_runs_thread_once():
    store = Store()
    writer = RunLogWriter(store.write)
    store.fail = True
    writer("run_agent", "lost")
    writer.flush(raise_error=False)  # the runner's flush at a stage's end never raises
    with pytest.raises(OSError, match="the database is gone"):
        writer("run_agent", "next")
    store.fail = False
    writer("run_agent", "again")  # raised once: the next line goes in
    writer.flush()
    assert store.lines() == ["again"]


def test_lines_from_many_threads_are_all_stored_once_each_threads_in_order():
    store = Store()
    writer = RunLogWriter(store.write)

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
    for who in range(4):
        own = [int(line.split(":")[1]) for line in lines if line.startswith(f"{who}:")]
        assert own == sorted(own)
