"""Live-log wake-ups across processes through PostgreSQL LISTEN/NOTIFY: what a
worker publishes wakes a follower on another server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from pier.server.pgbus import PgBus, PgNotifier
from tests.support.services import postgres_url

T = TypeVar("T")


@pytest.fixture
def pg_url() -> str:
    return postgres_url()


def run_follower(follow: Coroutine[Any, Any, T]) -> T:
    """The follower's coroutine on a loop of its own thread, as a server runs it:
    the test's own thread may hold a running loop (Playwright's sync API leaves one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, follow).result()


def test_a_workers_publish_wakes_a_follower_on_another_server(pg_url: str) -> None:
    server = PgBus(pg_url)
    server.start()
    worker = PgNotifier(pg_url)  # what `pier worker` publishes with
    tid = uuid.uuid4().hex

    async def follow() -> bool:
        wake = server.subscribe(tid)
        other = server.subscribe(uuid.uuid4().hex)
        worker.publish(tid)
        await asyncio.wait_for(wake.wait(), 30)
        await asyncio.sleep(0.2)
        return other.is_set()

    try:
        assert run_follower(follow()) is False, "only the named run's followers wake"
    finally:
        worker.close()
        server.close()


def test_a_replicas_publish_reaches_the_others(pg_url: str) -> None:
    first, second = PgBus(pg_url), PgBus(pg_url)
    first.start()
    second.start()
    tid = uuid.uuid4().hex

    async def follow() -> None:
        wake = second.subscribe(tid)
        first.publish(tid)
        await asyncio.wait_for(wake.wait(), 30)

    try:
        run_follower(follow())
    finally:
        first.close()
        second.close()
