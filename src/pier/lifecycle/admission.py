"""How many sandboxes a process asks the engine to create at once.

A burst's runs all start with a create (the container's create and start: its
namespaces, cgroups, network and the runtime's own process), and an engine asked
for more of them at once than it can make does not make them faster: on two
cores each of 32 concurrent starts waits behind the others, every run's create
stretches, and the runs that are already made wait for the CPU the queue of
starts takes. So creates go through a gate whose width follows the engine's
pace, as a TCP sender's window follows the network's (additive increase,
multiplicative decrease):

- the fastest create seen lately is the engine's pace unloaded;
- a create that takes more than TOLERANCE times that says the engine is
  queueing: the width shrinks by BACKOFF (never below its floor, below);
- a create within it says there is room: the width grows by one per width's
  worth of creates (about one per round), up to the ceiling.

The width never falls below FLOOR_PER_CPU creates per CPU, where it starts: on
this 2-core machine 8 concurrent creates kept the engine's pace (a burst at 8
slots ran faster with no gate than with one narrowed to 2), while 32 at once
did not (docs/speed.md, "Admission"). PIER_CREATE_CONCURRENCY fixes the width
instead (0, the default: adaptive). What a run waits at the gate is its
create's time, as before; the gate only decides the order.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator

TOLERANCE = 2.0  # a create this many times the fastest lately means a queue at the engine
BACKOFF = 0.75
WINDOW = 64  # creates the "fastest lately" is taken over: an engine that became slower for good is re-learnt
FLOOR_PER_CPU = 4


class CreateGate:
    """At most `width` creates at once; `width` adapts (fixed when `fixed` is given)."""

    def __init__(
        self,
        ceiling: int,
        start: int,
        fixed: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        """start is also the floor the width never goes below (capped at the ceiling)."""
        self.ceiling = max(1, ceiling)
        self.fixed = fixed
        self.floor = float(min(max(1, start), self.ceiling))
        self._width = float(fixed) if fixed else self.floor
        self._clock = clock
        self._in_flight = 0
        self._recent: deque[float] = deque(maxlen=WINDOW)
        self._cond = threading.Condition()

    @property
    def width(self) -> int:
        return int(self._width)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @contextlib.contextmanager
    def admitted(self) -> Iterator[None]:
        """Hold a place while the body (one create) runs; wait for one first."""
        with self._cond:
            while self._in_flight >= int(self._width):
                self._cond.wait()
            self._in_flight += 1
        began = self._clock()
        made = False
        try:
            yield
            made = True
        finally:
            took = self._clock() - began
            with self._cond:
                self._in_flight -= 1
                if made:  # a failed create says nothing of the engine's pace
                    self.observe(took)
                self._cond.notify_all()

    def observe(self, took: float) -> None:
        """Learn from one create's time (the caller holds the lock, or is a test)."""
        if self.fixed:
            return
        fastest = min(self._recent, default=took)
        self._recent.append(took)
        if took > TOLERANCE * fastest:
            self._width = max(self.floor, self._width * BACKOFF)
        else:
            self._width = min(float(self.ceiling), self._width + 1.0 / self._width)


_gates: weakref.WeakKeyDictionary[object, CreateGate] = weakref.WeakKeyDictionary()
_gates_lock = threading.Lock()


def gate_for(backend: object, ceiling: int, start: int, fixed: int | None) -> CreateGate:
    """The process's gate for one backend (one engine): every run's create of
    this process passes the same one."""
    with _gates_lock:
        gate = _gates.get(backend)
        if gate is None or gate.ceiling != max(1, ceiling) or gate.fixed != fixed:
            gate = _gates[backend] = CreateGate(ceiling, start, fixed)
        return gate
