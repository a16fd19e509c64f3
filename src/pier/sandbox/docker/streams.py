"""Reading the engine's blocking streams (build and pull progress) within a deadline."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_END = object()


def iterate_until(open_stream: Callable[[], Iterable[Any]], deadline: float) -> Iterator[Any]:
    """The items of the stream open_stream() returns, raising TimeoutError once the
    monotonic deadline passes. Opening and reading happen in a daemon thread, so a
    silent engine cannot hold the caller past the deadline; that thread is then
    left to end with the stream."""
    items: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue()

    def produce() -> None:
        try:
            for item in open_stream():
                items.put((item, None))
        except BaseException as exc:
            items.put((_END, exc))
            return
        items.put((_END, None))

    threading.Thread(target=produce, name="pier-docker-stream", daemon=True).start()
    while True:
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise queue.Empty
            item, error = items.get(timeout=remaining)
        except queue.Empty:
            raise TimeoutError("the engine's stream ran past its deadline") from None
        if item is _END:
            if error is not None:
                raise error
            return
        yield item
