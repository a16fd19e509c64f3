"""Wakes live followers of a run (SSE streams, run-sync) the moment its log grows
or it ends, instead of having them poll the store in a tight loop.

Worker threads publish; followers wait on an asyncio.Event in the server's
event loop. The store stays the source of truth: a follower that wakes reads
what is new from it, and one that misses a wake-up still polls on a timeout.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict


class RunBus:
    """The in-process bus (embedded mode: the runs execute in this process).
    pgbus.PgBus extends it across processes on PostgreSQL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: defaultdict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = defaultdict(
            set
        )
        self._threads: defaultdict[str, set[threading.Event]] = defaultdict(set)

    def subscribe(self, trajectory_id: str) -> asyncio.Event:
        """An event set whenever the run changes; call from the event loop."""
        event = asyncio.Event()
        with self._lock:
            self._waiters[trajectory_id].add((asyncio.get_running_loop(), event))
        return event

    def unsubscribe(self, trajectory_id: str, event: asyncio.Event) -> None:
        with self._lock:
            waiters = self._waiters.get(trajectory_id)
            if waiters is None:
                return
            for item in [w for w in waiters if w[1] is event]:
                waiters.discard(item)
            if not waiters:
                del self._waiters[trajectory_id]

    def wake_on(self, trajectory_id: str) -> threading.Event:
        """A threading.Event set whenever the run changes, for a follower
        outside any event loop (`pier run --remote`); clear it before reading."""
        event = threading.Event()
        with self._lock:
            self._threads[trajectory_id].add(event)
        return event

    def start(self) -> None:
        """Nothing to start in-process."""

    def close(self) -> None:
        """Nothing to release in-process."""

    def publish(self, trajectory_id: str) -> None:
        """Wake the run's followers; safe from any thread, cheap when there are none."""
        with self._lock:
            waiters = list(self._waiters.get(trajectory_id, ()))
            for waiting in self._threads.get(trajectory_id, ()):
                waiting.set()
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop has closed (server shutting down)
                continue
