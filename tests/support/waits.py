"""Waiting for a condition in a test, with a time limit that fails it."""

from __future__ import annotations

import time


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    """predicate's first true value, asked every `interval` s; fails the test
    (`what: not after TIMEOUTs`) when none comes within timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not after {timeout}s"
        time.sleep(interval)
