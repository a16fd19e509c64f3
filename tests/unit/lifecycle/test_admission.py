"""The create gate: its width follows the engine's pace (additive increase,
multiplicative decrease), and it never lets more creates through than its width."""

from __future__ import annotations

import threading
import time

import pytest

from pier.lifecycle.admission import BACKOFF, TOLERANCE, CreateGate, gate_for


def test_creates_at_the_engines_unloaded_pace_widen_it_to_the_ceiling():
    gate = CreateGate(ceiling=8, start=2)
    for _ in range(200):
        gate.observe(0.3)
    assert gate.width == 8


def test_a_create_past_the_tolerance_narrows_it_and_never_below_its_floor():
    gate = CreateGate(ceiling=32, start=4)
    for _ in range(1000):
        gate.observe(0.3)
    width = gate._width
    assert width == 32
    gate.observe(0.3 * TOLERANCE * 1.1)
    assert gate._width == pytest.approx(width * BACKOFF)
    for _ in range(50):
        gate.observe(100.0)
    assert gate.width == 4  # the floor it started at


def test_a_fixed_width_does_not_move():
    gate = CreateGate(ceiling=32, start=2, fixed=5)
    for took in (0.1, 10.0, 0.1, 10.0):
        gate.observe(took)
    assert gate.width == 5


class QueueingEngine:
    """An engine whose creates take `base` seconds each plus `base` for every
    other create in flight (one that makes them one after the other)."""

    def __init__(self, base: float):
        self.base = base
        self.in_flight = 0
        self.most = 0
        self._lock = threading.Lock()

    def create(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            took = self.base * self.in_flight
        time.sleep(took)
        with self._lock:
            self.in_flight -= 1


def test_under_a_queueing_engine_the_gate_keeps_few_creates_in_flight():
    """32 runs at once against an engine that queues: without the gate all 32
    would be in flight; with it the width stays near what the engine takes
    (creates within twice the fastest one's time)."""
    engine = QueueingEngine(base=0.005)
    gate = CreateGate(ceiling=32, start=2)  # a floor of 2

    def run() -> None:
        for _ in range(6):
            with gate.admitted():
                engine.create()

    threads = [threading.Thread(target=run) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert engine.most <= 6, f"{engine.most} creates were in flight at once"
    assert gate.in_flight == 0


def test_a_failed_create_frees_its_place_and_teaches_nothing():
    gate = CreateGate(ceiling=4, start=1)
    with pytest.raises(RuntimeError), gate.admitted():
        raise RuntimeError("the engine refused")
    assert gate.in_flight == 0 and gate._recent == type(gate._recent)(maxlen=gate._recent.maxlen)
    with gate.admitted():  # not held by the failed one
        pass


def test_one_gate_per_backend_in_a_process():
    class Backend:
        pass

    one, other = Backend(), Backend()
    assert gate_for(one, 8, 2, None) is gate_for(one, 8, 2, None)
    assert gate_for(one, 8, 2, None) is not gate_for(other, 8, 2, None)
    assert gate_for(one, 8, 2, 3).width == 3  # another setting: a gate of its own
