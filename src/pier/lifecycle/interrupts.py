"""Signals that stop a `pier run`: SIGINT (Ctrl-C), SIGTERM (`kill`, a service
manager), SIGHUP (its terminal closed). Each becomes an Interrupted exception in
the main thread, so the runner cancels the run, saying why, and deletes its
sandbox and scratch files before the process exits with 128 + the signal's number.

Only the first signal interrupts: those that follow while the run is cleaned up
are ignored, and one that comes during the clean-up is held until it is done.
Python runs signal handlers in the main thread only, so all of this concerns the
main thread (the CLI's); runs in a server's worker threads are unaffected.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_WHY = {
    signal.SIGINT: "Ctrl-C",
    signal.SIGTERM: "it was asked to stop",
    signal.SIGHUP: "its terminal closed",
}


class Interrupted(BaseException):
    """A stop signal reached the process running the run. A BaseException, as
    KeyboardInterrupt is, so that no stage's `except Exception` takes it for a failure."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def interruption_reason(exc: BaseException) -> str:
    """What stopped the run, for its record: "pier run received SIGTERM (...)"."""
    if isinstance(exc, KeyboardInterrupt):
        exc = Interrupted(signal.SIGINT)
    if isinstance(exc, Interrupted):
        sig = signal.Signals(exc.signum)
        return f"pier received {sig.name} ({_WHY.get(sig, 'a stop signal')})"
    return f"{type(exc).__name__}: {exc}"


class _Guard:
    """The main thread's signal state (handlers only ever run there)."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.deferring = 0
        self.held = False

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is not None:  # already stopping: let the clean-up finish
            return
        self.received = signum
        if self.deferring:
            self.held = True
            return
        raise Interrupted(signum)


_guard: _Guard | None = None


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """Within the block, the first stop signal raises Interrupted (main thread only)."""
    global _guard
    guard = _Guard()
    previous = {sig: signal.signal(sig, guard.handle) for sig in STOP_SIGNALS}
    _guard = guard
    try:
        yield
    finally:
        _guard = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold a stop signal that comes during the block until it ends, then raise
    it: the clean-up it protects is never cut short. No effect outside the main thread."""
    guard = _guard
    if guard is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    guard.deferring += 1
    try:
        yield
    finally:
        guard.deferring -= 1
    if not guard.deferring and guard.held and guard.received is not None:
        guard.held = False
        raise Interrupted(guard.received)
