"""Live-log wake-ups across processes: PostgreSQL LISTEN/NOTIFY behind the bus.

A `pier worker` (or any replica) publishes a run's id on one channel whenever
its log grows or it changes; every `pier serve` on the same database listens
and wakes its own followers through its in-process RunBus. The store stays the
source of truth (a follower reads what is new from it), so a lost notification
only delays a line to the followers' next poll.

Publishing never blocks a run: ids are queued, coalesced, and sent by one
thread on its own connection.
"""

from __future__ import annotations

import logging
import threading

import psycopg

from pier.db.engine import conninfo, is_postgres
from pier.server.bus import RunBus

__all__ = ["PgBus", "PgNotifier", "is_postgres"]

log = logging.getLogger(__name__)

CHANNEL = "pier_runs"
RECONNECT_SEC = 1.0


class PgNotifier:
    """Publishes run ids on the channel, coalesced, from a thread of its own."""

    def __init__(self, database_url: str):
        self._url = conninfo(database_url)
        self._lock = threading.Condition()
        self._ids: set[str] = set()
        self._stopped = False
        self._thread = threading.Thread(target=self._send, name="pier-notify", daemon=True)
        self._thread.start()

    def publish(self, trajectory_id: str) -> None:
        with self._lock:
            self._ids.add(trajectory_id)
            self._lock.notify()

    def close(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify()
        self._thread.join(5)

    def _send(self) -> None:
        while not self._stopped:
            try:
                with psycopg.connect(self._url, autocommit=True) as conn:
                    while True:
                        ids = self._next()
                        if ids is None:
                            return
                        for tid in ids:
                            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, tid))
            except psycopg.Error as exc:
                log.warning("live-log notifications paused (%s); retrying", exc)
                threading.Event().wait(RECONNECT_SEC)

    def _next(self) -> set[str] | None:
        with self._lock:
            while not self._ids and not self._stopped:
                self._lock.wait()
            if self._stopped:
                return None
            ids, self._ids = self._ids, set()
            return ids


class PgBus(RunBus):
    """A RunBus whose publish reaches every process listening on the database,
    and which wakes its own followers on what any of them publishes."""

    def __init__(self, database_url: str):
        super().__init__()
        self._url = conninfo(database_url)
        self._notifier = PgNotifier(database_url)
        self._stopped = threading.Event()
        self._listening = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="pier-listen", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._listening.wait(10)

    def publish(self, trajectory_id: str) -> None:
        super().publish(trajectory_id)  # this process's followers at once
        self._notifier.publish(trajectory_id)

    def close(self) -> None:
        self._stopped.set()
        self._notifier.close()
        if self._thread.is_alive():
            self._thread.join(5)

    def _listen(self) -> None:
        while not self._stopped.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._listening.set()
                    while not self._stopped.is_set():
                        for note in conn.notifies(timeout=1.0):
                            RunBus.publish(self, note.payload)
            except psycopg.Error as exc:
                if self._stopped.is_set():
                    return
                log.warning("live-log listener lost its connection (%s); reconnecting", exc)
                self._stopped.wait(RECONNECT_SEC)
