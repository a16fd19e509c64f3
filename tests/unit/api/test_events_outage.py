"""A run's live log stream (SSE) rides out a database that stops answering:
it keeps the connection with comment lines and goes on from the last line it
sent once the database is back; past PIER_DB_RETRY_SEC, or on an error that is
not the database's, it ends as before. (Cut at once, a browser's EventSource
reconnects into a 503 and gives up for good.)"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from sqlalchemy.exc import OperationalError

from pier.api.routes import events as sse
from pier.db.schemas import Event
from pier.record import RunStatus
from pier.server.bus import RunBus
from tests.support.aio import run_coroutine


def refused() -> OperationalError:
    return OperationalError("SELECT", {}, Exception("connection refused"))


class FlakyStore:
    """A store whose reads fail `down` times (with `error`), then answer: a
    running run with two lines, then the run completed."""

    def __init__(self, down: int, error: Exception):
        self.down, self.error, self.reads = down, error, 0
        self.lines = [Event(seq=n, ts=datetime.now(UTC), stage="run_agent", line=f"line {n}") for n in (1, 2)]

    def get_run(self, trajectory_id: str, collection: str) -> SimpleNamespace:
        self.reads += 1
        if self.reads <= self.down:
            raise self.error
        done = self.reads > self.down + 1
        return SimpleNamespace(status=RunStatus.completed if done else RunStatus.running)

    def events(self, trajectory_id: str, after: int, limit: int) -> list[Event]:
        return [e for e in self.lines if e.seq > after]


def follow(store: FlakyStore, retry_sec: float) -> list[str]:
    state = SimpleNamespace(store=store, bus=RunBus(), settings=SimpleNamespace(db_retry_sec=retry_sec))
    record = SimpleNamespace(trajectory_id="t1", collection="c")
    released: list[int] = []

    async def collect() -> list[str]:
        return [chunk async for chunk in sse._follow(state, record, 0, lambda: released.append(1))]  # type: ignore[arg-type]

    chunks = run_coroutine(asyncio.wait_for(collect(), 30))
    assert released == [1], "the stream's slot is freed however it ends"
    return chunks


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch) -> None:
    monkeypatch.setattr(sse, "POLL_SEC", 0.01)


def test_the_stream_waits_out_the_outage_and_sends_every_line_once() -> None:
    chunks = follow(FlakyStore(down=3, error=refused()), retry_sec=60)
    waiting = [c for c in chunks if c.startswith(": the database is unreachable")]
    assert len(waiting) == 3, chunks
    logs = [c for c in chunks if c.startswith("id: ")]
    assert [c.split("\n")[0] for c in logs] == ["id: 1", "id: 2"]
    assert chunks[-1].startswith("event: end") and '"completed"' in chunks[-1]


def test_past_the_budget_the_stream_ends_with_the_error() -> None:
    with pytest.raises(OperationalError):
        follow(FlakyStore(down=10_000, error=refused()), retry_sec=0.05)


def test_an_error_that_is_not_the_databases_ends_the_stream_at_once() -> None:
    store = FlakyStore(down=1, error=RuntimeError("a bug"))
    with pytest.raises(RuntimeError):
        follow(store, retry_sec=60)
    assert store.reads == 1
