"""What every fault test asserts once its fault is over: every run ended
within the bound, with the reason expected of it; none ran twice; no sandbox
is left."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from pier.db import Store
from pier.record import RunStatus, Trajectory
from tests.support.api_server import Collection, make_collection
from tests.support.fleet import FAKE_BACKEND, Fleet, ran_on
from tests.support.fleet_backend import sandboxes_left

RELEASE_SEC = 30  # a run's end to its sandbox's removal (the workflow's release, or a sweep)


def fake_fleet(fleet: Fleet, **settings: str) -> Collection:
    """A server on `fleet` with the fake backend, and a collection with task `t`."""
    fleet.settings.update({
        "PIER_SANDBOX_BACKEND": FAKE_BACKEND,
        "PIER_TEST_SANDBOX_MARKS": str(fleet.home / "sandboxes"),
        **settings,
    })  # fmt: skip
    server = fleet.server()
    collection = make_collection(server, "pier-fake:latest", prefix="faults")
    collection.put_task("t", "echo hi")
    return collection


@dataclass
class Ends:
    records: dict[str, Trajectory]
    waited: float  # seconds from the call until every run had ended

    def statuses(self) -> dict[str, str]:
        return {tid: r.status.value for tid, r in self.records.items()}

    def errors(self) -> dict[str, str | None]:
        return {tid: r.error for tid, r in self.records.items() if r.status != RunStatus.completed}


def ends_within(store: Store, ids: list[str], bound: float, fleet: Fleet | None = None) -> Ends:
    """Every run's end, once all have ended; AssertionError naming the runs
    still open after `bound` seconds (stuck), with their workflows' histories
    when `fleet` is given."""
    started = time.monotonic()
    while True:
        records = {tid: store.get_run(tid) for tid in ids}
        open_ = {tid: r.status.value for tid, r in records.items() if not r.status.terminal}
        if not open_:
            return Ends(records, time.monotonic() - started)
        if time.monotonic() - started >= bound:
            detail = "".join(f"\n{tid}: {_history(fleet, tid)}" for tid in open_) if fleet else ""
            raise AssertionError(f"{len(open_)} run(s) still open after {bound:.0f}s: {open_}{detail}")
        time.sleep(0.5)


def pollers(fleet: Fleet, queue: str) -> set[str]:
    """The identities of the processes that polled `queue` for activities lately (Temporal's own view)."""

    async def describe() -> set[str]:
        client = await Client.connect(fleet.address)
        response = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace="default",
                task_queue=TaskQueue(name=queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
        return {poller.identity for poller in response.pollers}

    return asyncio.run(describe())


def events(fleet: Fleet, workflow_id: str) -> list[str]:
    """A workflow's events in short: type, and the activity and queue of scheduled ones."""

    async def fetch() -> list:
        client = await Client.connect(fleet.address)
        return (await client.get_workflow_handle(workflow_id).fetch_history()).events

    short = []
    for event in asyncio.run(fetch()):
        kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            kind += f"({attrs.activity_type.name}@{attrs.task_queue.name[-8:]})"
        short.append(kind)
    return short


def _history(fleet: Fleet, workflow_id: str) -> str:
    try:
        return " ".join(events(fleet, workflow_id))
    except Exception as exc:
        return f"(no history: {exc})"


def assert_clean(
    fleet: Fleet, store: Store, ids: list[str], restarted_ok: Callable[[str], bool] | None = None
) -> None:
    """0 duplicated (each run began on one worker, unless its log says it
    started again before its agent ran), 0 sandboxes left, 0 runs in the
    database beyond `ids` for this collection."""
    for tid in ids:
        workers = ran_on(store, tid)
        if len(workers) > 1:
            lines = [e.line for e in store.events(tid)]
            assert (restarted_ok or (lambda _t: False))(tid) or any(
                "before the agent started" in line for line in lines
            ), f"run {tid} ran on {workers} with no restart said"
        agent_runs = [e for e in store.events(tid) if e.line == "tick 1"]
        assert len(agent_runs) <= 1, f"run {tid}'s agent ran {len(agent_runs)} times"
    deadline = time.monotonic() + RELEASE_SEC
    while (left := sandboxes_left(fleet.home / "sandboxes")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"{len(left)} sandbox(es) left {RELEASE_SEC}s after the runs ended: {left}"
