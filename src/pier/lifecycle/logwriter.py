"""A run's log lines into the store, gathered: one write for many lines.

Every line of a run's log (pier's own and the agent's output) was its own write
transaction, and under SQLite every run of a server waits for the one writer:
an agent printing a thousand lines a second cost a thousand transactions a
second. Lines now go in as a group commit does: a line that comes after a quiet
spell (WINDOW_S since the last write) is written at once, so the first line of
a burst is as prompt as before; the lines that follow it within the window are
gathered and written together when it ends, in one transaction. At most about
1/WINDOW_S writes a second then, whatever the agent prints.

The runner flushes at the end of every stage and before the run's record is
saved, so a stage's lines are stored before the record says it ended. What is
written is then handed to `stored` (the live view: the CLI's console, a
server's followers, who read the store when told), in order. A write that fails
in the flushing thread is raised in the run's own thread at its next line or
flush, as a failed write always was."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from itertools import groupby

WINDOW_S = 0.1

Write = Callable[[list[str], str], None]  # (lines, stage): one transaction
Stored = Callable[[str, str], None]  # (stage, line), after it is stored


class RunLogWriter:
    def __init__(
        self,
        write: Write,
        stored: Stored | None = None,
        window: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._write, self._stored = write, stored
        self._window, self._clock = window, clock
        self._pending: list[tuple[str, str]] = []
        self._lock = threading.Lock()  # the pending lines
        self._writing = threading.Lock()  # one write at a time, in order
        self._last_write = float("-inf")
        self._timer: threading.Timer | None = None
        self._error: BaseException | None = None
        self.writes = 0  # transactions made (for benchmarks and tests)

    def __call__(self, stage: str, line: str) -> None:
        self._raise_kept()
        with self._lock:
            self._pending.append((stage, line))
            if self._timer is not None:  # a write is due at the window's end: it takes this line
                return
            wait = self._last_write + self._window - self._clock()
            if wait > 0:
                timer = threading.Timer(wait, self._flush_from_timer)
                timer.args = (timer,)
                timer.daemon = True
                self._timer = timer
                timer.start()
                return
        self.flush()

    def flush(self) -> None:
        """Write what is pending now (in the caller's thread)."""
        self._raise_kept()
        self._flush()

    def _flush_from_timer(self, timer: threading.Timer) -> None:
        try:
            self._flush(timer)
        except BaseException as exc:  # raised again in the run's thread
            self._error = exc

    def _flush(self, timer: threading.Timer | None = None) -> None:
        with self._writing:
            with self._lock:
                if timer is None and self._timer is not None:  # written now: the due write is not needed
                    self._timer.cancel()
                    self._timer = None
                elif timer is not None and self._timer is timer:
                    self._timer = None
                lines, self._pending = self._pending, []
                if not lines:
                    return
                self._last_write = self._clock()
            for stage, group in groupby(lines, key=lambda item: item[0]):
                texts = [line for _stage, line in group]
                self._write(texts, stage)
                self.writes += 1
                if self._stored is not None:
                    for text in texts:
                        self._stored(stage, text)

    def _raise_kept(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error
