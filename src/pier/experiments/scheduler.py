"""The poller inside `pier serve` (and `pier experiment run`) that works the
running experiments: every `poll_sec`, one `Experiments.step` each. State is
the database's, so a server that restarts goes on where it was; the lease keeps
two pollers from working one experiment at once."""

from __future__ import annotations

import logging
import threading

from pier.db.retry import log_failed_round
from pier.experiments.service import Experiments

log = logging.getLogger(__name__)
MIN_GAP_SEC = 0.05


def warm_statistics() -> None:
    """Load the statistics libraries now, in the background: statsmodels (with
    scipy and pandas) takes seconds to import, which the first results read
    would otherwise wait for. The scheduler does it once the server has an
    experiment (stored at start, or created since): a server without any never
    pays those seconds of CPU, which a burst of runs just after the server
    starts would otherwise share the machine with (docs/speed.md)."""
    try:
        import statsmodels.stats.proportion  # noqa: F401
    except Exception:  # the read that needs it will say what is wrong
        log.exception("could not load the statistics libraries")


class ExperimentScheduler:
    def __init__(self, experiments: Experiments, poll_sec: float, wake: threading.Event | None = None):
        """`wake`, when given, is set by whoever learns that a run ended (the
        executor's hooks): the next pass comes at once instead of at the poll."""
        self.experiments = experiments
        self.poll_sec = poll_sec
        self._stop = threading.Event()
        self._wake = wake or threading.Event()
        self._asked = threading.Event()  # wake() was called: an experiment was created or resumed
        self._warmed = False
        self._stored: bool | None = None  # the store held an experiment at start (None: not asked)
        self._thread = threading.Thread(target=self._loop, name="pier-experiments", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Poll now (an experiment was created or resumed)."""
        self._asked.set()
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.experiments.poll()
                self._warm_when_used()  # after the pass: a new experiment's runs do not wait for it
            except Exception as exc:  # a store hiccup: the next poll may do better; the thread lives on
                log_failed_round(log, "experiment poll failed", exc)
            self._wake.wait(self.poll_sec)
            self._wake.clear()
            self._stop.wait(MIN_GAP_SEC)  # runs ending in a burst: one pass for the lot

    def _warm_when_used(self) -> None:
        """warm_statistics once there is an experiment whose results may be read:
        one stored when the server started (the store is asked once), or one
        created or resumed since (wake)."""
        if self._warmed:
            return
        if self._stored is None:
            self._stored = bool(self.experiments.store.list_experiments(limit=1))
        if self._stored or self._asked.is_set():
            self._warmed = True
            warm_statistics()
