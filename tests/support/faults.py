"""What every fault test asserts once its fault is over: every run ended
within the bound, with the reason expected of it; none ran twice; no sandbox
is left."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.api_server import Collection, make_collection
from tests.support.fleet import FAKE_BACKEND, Fleet, ran_on
from tests.support.fleet_backend import sandboxes_left

from pier.db import Store
from pier.record import RunStatus, Trajectory


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


def ends_within(store: Store, ids: list[str], bound: float) -> Ends:
    """Every run's end, once all have ended; AssertionError naming the runs
    still open after `bound` seconds (stuck)."""
    started = time.monotonic()
    while True:
        records = {tid: store.get_run(tid) for tid in ids}
        open_ = {tid: r.status.value for tid, r in records.items() if not r.status.terminal}
        if not open_:
            return Ends(records, time.monotonic() - started)
        assert time.monotonic() - started < bound, f"{len(open_)} run(s) still open after {bound:.0f}s: {open_}"
        time.sleep(0.5)


def assert_clean(fleet: Fleet, store: Store, ids: list[str], restarted_ok: Callable[[str], bool] | None = None) -> None:
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
