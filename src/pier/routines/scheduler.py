"""The poller inside `pier serve` that fires due routines.

Every `poll_sec` it reads the routines that are due and, for each, claims the
tick in the database before firing (see pier.db.routines): any number of
servers may share one store, and each tick starts one run. The next tick is
the first after now, so a server that was down fires a missed tick once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from pier.db import Store, StoredRoutine
from pier.db.retry import log_failed_round
from pier.errors import InputError
from pier.record import utcnow
from pier.routines.schedule import next_tick
from pier.routines.service import Clock
from pier.telemetry import metrics

log = logging.getLogger(__name__)

Fire = Callable[[StoredRoutine], object]


class Scheduler:
    def __init__(self, store: Store, fire: Fire, poll_sec: float, clock: Clock = utcnow):
        self.store = store
        self.fire = fire
        self.poll_sec = poll_sec
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pier-routines", daemon=True)

    def poll(self) -> list[StoredRoutine]:
        """Fire what is due now; the routines this call fired (once per claim)."""
        now = self.clock()
        fired = []
        for routine in self.store.due_routines(now):
            for claimed in (self._claim_run_now(routine, now), self._claim_tick(routine, now)):
                if claimed:
                    self._fire(routine)
                    fired.append(routine)
        return fired

    def _claim_run_now(self, routine: StoredRoutine, now: datetime) -> bool:
        if routine.run_now_at is None:
            return False
        return self.store.claim_run_now(routine.id, routine.run_now_at, now)

    def _claim_tick(self, routine: StoredRoutine, now: datetime) -> bool:
        if not routine.enabled or routine.next_run_at is None or routine.next_run_at > now:
            return False
        try:
            following = next_tick(routine.cron_expression, routine.timezone, now)
        except InputError as exc:  # checked when stored; a newer cron library may read it otherwise
            log.error("routine %s (%s) has a schedule pier cannot read: %s", routine.id, routine.name, exc)
            return False
        claimed = self.store.claim_tick(routine.id, routine.next_run_at, following, now)
        if claimed:
            _count_missed(routine.cron_expression, routine.timezone, routine.next_run_at, now)
        return claimed

    def _fire(self, routine: StoredRoutine) -> None:
        try:
            self.fire(routine)
            metrics.routine_ticks.labels("fired").inc()
        except Exception:  # one routine's failure must not stop the others
            metrics.routine_ticks.labels("failed").inc()
            log.exception("routine %s (%s/%s/%s) could not fire", routine.id, routine.collection,
                          routine.task, routine.name)  # fmt: skip

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while True:  # first at once: ticks missed while the server was down fire now
            try:
                self.poll()
            except Exception as exc:  # a store hiccup: the next poll may do better; the thread lives on
                log_failed_round(log, "routine poll failed", exc)
            if self._stop.wait(self.poll_sec):
                return


MAX_MISSED_COUNTED = 1000


def _count_missed(cron: str, timezone: str, due: datetime, now: datetime) -> None:
    """Ticks after `due` that also passed while no server fired them (one fires for all)."""
    missed, tick = 0, due
    while missed < MAX_MISSED_COUNTED:
        tick = next_tick(cron, timezone, tick)
        if tick > now:
            break
        missed += 1
    if missed:
        metrics.routine_ticks.labels("missed").inc(missed)
