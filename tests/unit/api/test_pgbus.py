"""Live-log wake-ups across processes through PostgreSQL LISTEN/NOTIFY: what a
worker publishes wakes a follower on another server."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from pier.api.pgbus import PgBus, PgNotifier
from tests.support.services import postgres_url


@pytest.fixture
def pg_url() -> str:
    return postgres_url()


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
        assert asyncio.run(follow()) is False, "only the named run's followers wake"
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
        asyncio.run(follow())
    finally:
        first.close()
        second.close()
