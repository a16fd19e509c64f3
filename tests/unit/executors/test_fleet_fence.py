"""A fleet worker starts a run's agent only once Temporal confirms that the
attempt is still the run's: an attempt given up on (its worker was declared
lost, the run may run again elsewhere) deletes its sandbox and writes nothing
more, so its agent never starts."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.client import AsyncActivityCancelledError
from temporalio.service import RPCError, RPCStatusCode

from pier.executors.temporal_worker import FleetActivities
from pier.record import StageRecord, StageStatus


class Handle:
    def __init__(self, answer: BaseException | None):
        self.answer = answer
        self.beats: list[Any] = []

    async def heartbeat(self, *details: Any) -> None:
        self.beats.append(details)
        if self.answer is not None:
            raise self.answer


class Sandbox:
    deleted = False

    def delete(self) -> None:
        self.deleted = True


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The worker's event loop, in a thread of its own (the run's stages run on another)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def fenced(loop: asyncio.AbstractEventLoop, answer: BaseException | None) -> tuple[Any, Handle, list[str]]:
    handle = Handle(answer)
    client = SimpleNamespace(get_async_activity_handle=lambda task_token: handle)
    acts = FleetActivities.__new__(FleetActivities)  # no hooks, pool or settings needed here
    acts.identity, acts.client = "w1", client
    written: list[str] = []
    ctx = SimpleNamespace(
        on_step=None,
        save_record=lambda _record: written.append("record"),
        emit=lambda _stage, line: written.append(line),
        cancel=threading.Event(),
        sandbox=Sandbox(),
        record=SimpleNamespace(trajectory_id="t1"),
    )
    acts._fence(ctx, b"token", loop)
    return ctx, handle, written


def step(name: str, status: StageStatus) -> StageRecord:
    return StageRecord(name=name, status=status)


def test_an_attempt_temporal_no_longer_knows_never_starts_its_agent(loop) -> None:
    gone = RPCError("activity not found", RPCStatusCode.NOT_FOUND, b"")
    ctx, handle, written = fenced(loop, gone)
    ctx.on_step(step("setup", StageStatus.running))
    assert handle.beats == [], "only the agent's start is fenced"
    ctx.on_step(step("run_agent", StageStatus.running))
    assert handle.beats == [("w1",)]
    assert ctx.sandbox.deleted and ctx.cancel.is_set(), "the agent's sandbox must go before it starts"
    ctx.save_record(None)
    ctx.emit("run_agent", "tick 1")
    assert written == [], "a given-up attempt wrote to the run"


def test_an_attempt_still_held_starts_its_agent(loop) -> None:
    ctx, handle, written = fenced(loop, None)
    ctx.on_step(step("run_agent", StageStatus.running))
    assert handle.beats == [("w1",)]
    assert not ctx.sandbox.deleted and not ctx.cancel.is_set()
    ctx.save_record(None)
    assert written == ["record"]


def test_a_run_being_cancelled_does_not_start_its_agent_and_says_so(loop) -> None:
    ctx, _handle, written = fenced(loop, AsyncActivityCancelledError())
    ctx.on_step(step("run_agent", StageStatus.running))
    assert ctx.sandbox.deleted and ctx.cancel.is_set()
    ctx.save_record(None)
    assert written == ["record"], "a cancelled run records its end"
