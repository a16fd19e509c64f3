"""Where a backend's notes on a run's engine calls go (an engine call tried
again, say): the run's log while one of its stages runs in this thread (the
runner says so with `to_run_log`), and pier's own log always. A backend is
shared by every run of the process, so the run is the caller's context, not
the backend's."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pier.sandbox.base import LineSink

log = logging.getLogger(__name__)

_sink: ContextVar[LineSink | None] = ContextVar("pier_sandbox_run_log", default=None)


@contextmanager
def to_run_log(sink: LineSink) -> Iterator[None]:
    """While in the block, this thread's notes go to `sink` too."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def note(line: str, level: int = logging.WARNING) -> None:
    """`line` in pier's log, and in the run's log when a stage of a run is on."""
    log.log(level, "%s", line)
    sink = _sink.get()
    if sink is not None:
        try:
            sink(line)
        except Exception as exc:  # the run's log is down (its database): the note is in pier's log
            log.debug("could not write to the run's log: %s", exc)
