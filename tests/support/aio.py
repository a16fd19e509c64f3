"""Running a coroutine to its end from a synchronous test, whatever the test
process's main thread holds: a test before it may leave an event loop running
there (Playwright's sync API does), and asyncio.run refuses to start inside a
running loop. The coroutine gets a loop of its own on a thread of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-loop") as pool:
        return pool.submit(asyncio.run, coroutine).result()
