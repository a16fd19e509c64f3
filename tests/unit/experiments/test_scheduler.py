"""The scheduler loads the statistics libraries (seconds of CPU) only on a
server that has an experiment: stored when it started, or created since."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from pier.experiments import scheduler as scheduler_module
from pier.experiments.scheduler import ExperimentScheduler


class Passes:
    """Experiments as the scheduler sees them: a poll, and a store that lists them."""

    def __init__(self, stored: list[object]):
        self.stored = stored
        self.polls = threading.Semaphore(0)
        self.store = SimpleNamespace(list_experiments=lambda limit=100: self.stored[:limit])

    def poll(self) -> int:
        self.polls.release()
        return 0


@pytest.fixture
def warmed(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    calls: list[float] = []
    monkeypatch.setattr(scheduler_module, "warm_statistics", lambda: calls.append(time.monotonic()))
    return calls


def passes(experiments: Passes, count: int) -> None:
    for _ in range(count):
        assert experiments.polls.acquire(timeout=10), "the scheduler stopped polling"


def until_warmed(warmed: list[float], experiments: Passes) -> None:
    deadline = time.monotonic() + 10
    while not warmed and time.monotonic() < deadline:
        passes(experiments, 1)
    passes(experiments, 5)  # and not again


def test_a_server_without_experiments_does_not_load_them_until_one_is_created(warmed: list[float]):
    experiments = Passes(stored=[])
    scheduler = ExperimentScheduler(experiments, poll_sec=0.01)  # type: ignore[arg-type]
    scheduler.start()
    try:
        passes(experiments, 5)
        assert warmed == []
        scheduler.wake()  # as the API does when an experiment is created or resumed
        until_warmed(warmed, experiments)
        assert len(warmed) == 1
    finally:
        scheduler.stop()


def test_a_server_with_a_stored_experiment_loads_them_once(warmed: list[float]):
    experiments = Passes(stored=[object()])
    scheduler = ExperimentScheduler(experiments, poll_sec=0.01)  # type: ignore[arg-type]
    scheduler.start()
    try:
        until_warmed(warmed, experiments)
        scheduler.wake()
        passes(experiments, 5)
        assert len(warmed) == 1
    finally:
        scheduler.stop()
