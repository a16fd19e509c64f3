"""Run slots: how many runs execute at once in this process, in all and per
collection, counting a workflow's fan-out children as runs.

A top-level run takes a slot when the in-process executor starts it; a
fan-out's child takes one before it starts (waiting, and saying so in its log,
while its collection is at its concurrent_runs quota or the process at
PIER_MAX_CONCURRENT_RUNS). A parent that waits on its children lends its slot
to them meanwhile (else a quota of 1 would never let a child start) and takes
one back before its next step. So a collection's quota bounds its runs at
once, children included, and the executor's fair turn between collections
sees the children's slots as their collection's (docs/workflows.md)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Limit = Callable[[str], int | None]  # a collection's runs at once; None: no limit of its own


class RunSlots:
    def __init__(self, limit: Limit, total: int | None, counts_top_level: bool = False):
        self._limit = limit
        self._total = total  # the process's runs at once; None: no bound here
        # True under the in-process executor (it takes a slot for each run it
        # starts); False on a fleet's worker, whose own concurrency bounds its runs
        self.counts_top_level = counts_top_level
        self._cond = threading.Condition(threading.RLock())
        self._held: Counter[str] = Counter()
        self._woken: list[Callable[[], None]] = []

    def on_release(self, wake: Callable[[], None]) -> None:
        """`wake` is called (without this object's lock held) whenever a slot frees."""
        self._woken.append(wake)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Hold the count still: a check with may_take and a take() under it see the same count."""
        with self._cond:
            yield

    def held(self, collection: str | None = None) -> int:
        with self._cond:
            return sum(self._held.values()) if collection is None else self._held[collection]

    def limit(self, collection: str) -> int | None:
        return self._limit(collection)

    def may_take(self, collection: str) -> bool:
        with self._cond:
            if self._total is not None and sum(self._held.values()) >= self._total:
                return False
            limit = self._limit(collection)
            return limit is None or self._held[collection] < limit

    def take(self, collection: str) -> None:
        with self._cond:
            self._held[collection] += 1

    def release(self, collection: str) -> None:
        with self._cond:
            self._held[collection] -= 1
            if self._held[collection] <= 0:
                del self._held[collection]
            self._cond.notify_all()
        for wake in self._woken:
            wake()

    def wait_take(self, collection: str, waiting: Callable[[str], None] | None = None) -> None:
        """Take a slot of `collection`, waiting for one; `waiting` is told why first, once."""
        with self._cond:
            if self.may_take(collection):
                self._held[collection] += 1
                return
            why = self._why(collection)
        if waiting is not None:  # told outside the lock: it writes the run's log
            waiting(why)
        with self._cond:
            while not self.may_take(collection):
                # a release notifies; the timeout sees a quota an admin raised
                self._cond.wait(5.0)
            self._held[collection] += 1

    @contextmanager
    def hold(self, collection: str, waiting: Callable[[str], None] | None = None) -> Iterator[None]:
        self.wait_take(collection, waiting)
        try:
            yield
        finally:
            self.release(collection)

    @contextmanager
    def lend(self, collection: str, waiting: Callable[[str], None] | None = None) -> Iterator[None]:
        """The holder of one of `collection`'s slots gives it up while it waits, and takes one back."""
        self.release(collection)
        try:
            yield
        finally:
            self.wait_take(collection, waiting)

    def _why(self, collection: str) -> str:
        limit = self._limit(collection)
        if limit is not None and self._held[collection] >= limit:
            return f"the collection runs {self._held[collection]} runs, its concurrent_runs quota ({limit})"
        return f"this process runs {sum(self._held.values())} runs, PIER_MAX_CONCURRENT_RUNS ({self._total})"
