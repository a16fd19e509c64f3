"""The fleet's orchestration on the fake sandbox backend (no Docker): runs go
through Temporal to `pier worker` processes, spread, survive a worker lost
before their agent starts, fail naming the worker lost after, and cancel."""

from __future__ import annotations

import json
import os
import time

import pytest
from tests.support.api_server import Collection, make_collection
from tests.support.fleet import FAKE_BACKEND, Fleet, ran_on, wait_for

from pier.record import RunStatus

SCALE_RUNS = int(os.environ.get("PIER_TEST_FLEET_RUNS", "200"))


def setup(fleet: Fleet, **settings: str) -> Collection:
    fleet.settings.update({"PIER_SANDBOX_BACKEND": FAKE_BACKEND, **settings})
    server = fleet.server()
    collection = make_collection(server, "pier-fake:latest", prefix="fleet")
    collection.put_task("t", "echo hi")
    return collection


def statuses(collection: Collection, ids: list[str]) -> dict[str, str]:
    store_runs = {}
    for tid in ids:
        store_runs[tid] = collection.record("t", tid)["status"]
    return store_runs


def all_ended(fleet: Fleet, ids: list[str], timeout: float) -> dict[str, str]:
    store = fleet.store()

    def ended() -> dict[str, str] | None:
        got = {tid: store.get_run(tid).status.value for tid in ids}
        return got if all(RunStatus(s).terminal for s in got.values()) else None

    try:
        return wait_for(ended, timeout, "every run ended", interval=0.5)
    finally:
        store.close()


@pytest.mark.parametrize("runs", [SCALE_RUNS])
def test_runs_go_through_temporal_across_three_workers_none_lost(fleet: Fleet, runs: int) -> None:
    # The default heartbeat timeout: on a saturated 2-core machine a 5 s one
    # takes live workers for lost ones (their runs then fail, cleanly).
    collection = setup(fleet, PIER_WORKER_SLOTS="4", PIER_HEARTBEAT_TIMEOUT_SEC="15")
    for name in ("w1", "w2", "w3"):
        fleet.worker(name)
    ids = [collection.run("t") for _ in range(runs)]
    got = all_ended(fleet, ids, timeout=60 + runs * 1.5)
    store = fleet.store()
    errors = {tid: store.get_run(tid).error for tid, status in got.items() if status != "completed"}
    assert not errors, f"{len(errors)} of {runs} runs did not complete: {errors}"
    where = {tid: ran_on(store, tid) for tid in ids}
    # A run starts again only when a stage of it was taken and never ran (an
    # overloaded Temporal drops one now and then), and its log says so.
    restarted = [tid for tid, w in where.items() if len(w) > 1]
    for tid in restarted:
        assert any("before the agent started" in e.line for e in store.events(tid)), tid
    store.close()
    assert all(where.values()), "every run began on a worker"
    assert {w[-1] for w in where.values()} == {"w1", "w2", "w3"}, "the runs spread over every worker"
    print(f"{runs} runs completed on 3 workers; {len(restarted)} started again after a dropped stage")


def test_a_worker_lost_mid_agent_fails_its_run_naming_it(fleet: Fleet) -> None:
    collection = setup(fleet, PIER_TEST_AGENT_SEC="60", PIER_WORKER_SLOTS="1")
    doomed = fleet.worker("doomed")  # one slot: it takes no other run
    tid = collection.run("t")
    store = fleet.store()
    wait_for(lambda: ran_on(store, tid) == ["doomed"], 60, "the doomed worker took the run")
    fleet.settings["PIER_TEST_AGENT_SEC"] = "0"
    fleet.worker("survivor")  # runs not started on the doomed worker complete here
    others = [collection.run("t") for _ in range(3)]
    wait_for(lambda: store.get_run(tid).stage("run_agent").status == "running", 60, "the agent started")
    doomed.kill()
    killed_at = time.monotonic()
    record = collection.wait("t", tid, timeout=60)
    waited = time.monotonic() - killed_at
    assert record["status"] == "failed", record
    assert "worker doomed was lost" in record["error"], record["error"]
    assert waited < 5 + 5 + 30, f"the loss was noticed {waited:.0f}s after (heartbeat timeout 5s)"
    assert set(all_ended(fleet, others, 60).values()) == {"completed"}
    store.close()


def test_a_worker_lost_before_the_agent_started_costs_a_restart_elsewhere(fleet: Fleet) -> None:
    collection = setup(fleet)
    fleet.settings["PIER_TEST_CREATE_SEC"] = "60"  # its sandbox takes long to make
    slow = fleet.worker("slow")
    del fleet.settings["PIER_TEST_CREATE_SEC"]
    tid = collection.run("t")
    store = fleet.store()
    wait_for(lambda: ran_on(store, tid) == ["slow"], 60, "the slow worker took the run")
    slow.kill()
    fleet.worker("healthy")
    record = collection.wait("t", tid, timeout=90)
    assert record["status"] == "completed", record
    assert ran_on(store, tid) == ["slow", "healthy"]
    assert any("worker slow was lost before the agent started" in e.line for e in store.events(tid))
    store.close()


def test_cancel_from_the_api_stops_the_run_on_its_worker(fleet: Fleet) -> None:
    collection = setup(fleet, PIER_TEST_AGENT_SEC="120")
    fleet.worker("w1")
    tid = collection.run("t")
    store = fleet.store()
    wait_for(lambda: store.get_run(tid).stage("run_agent").status == "running", 60, "the agent started")
    with collection.client() as c:
        r = c.post(f"/api/v1/trajectory/{collection.name}/t/statuses", json={tid: "cancelled"})
    assert r.status_code == 200, r.text
    record = collection.wait("t", tid, timeout=30)
    assert record["status"] == "cancelled", record
    assert any("deleted" in e.line for e in store.events(tid)), "its sandbox was deleted"
    store.close()


def sse(server, token: str, tid: str, after: int = 0) -> tuple[list[int], str | None]:
    """Follow a run's events on `server` to its end: the log seqs and the end status."""
    seqs, end, event = [], None, None
    with (
        server.client(token, timeout=120) as c,
        c.stream("GET", f"/api/v1/runs/{tid}/events", headers={"Last-Event-ID": str(after)}) as response,
    ):
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("id: "):
                seqs.append(int(line.removeprefix("id: ")))
            elif line.startswith("data: ") and event == "end":
                end = json.loads(line.removeprefix("data: "))["status"]
                break
    return seqs, end


def test_a_replica_neither_fails_anothers_run_nor_misses_its_lines(fleet: Fleet) -> None:
    """Two servers on one database: the second starting does not fail the
    first's running run; the first dies; the run completes on its worker and a
    follower on the second, resuming with Last-Event-ID, misses no line."""
    collection = setup(fleet, PIER_TEST_AGENT_SEC="40")
    fleet.worker("w1")
    tid = collection.run("t")
    store = fleet.store()
    wait_for(lambda: store.get_run(tid).stage("run_agent").status == "running", 60, "the agent started")
    seen = max(e.seq for e in store.events(tid))
    replica = fleet.server()
    assert store.get_run(tid).status == RunStatus.running, "the replica's start left the run alone"
    collection.server.kill()
    seqs, end = sse(replica, collection.token, tid, after=seen)
    assert end == "completed"
    every = [e.seq for e in store.events(tid)]
    assert seqs == [s for s in every if s > seen], "the follower missed or repeated a line"
    store.close()


def test_a_run_cancelled_while_it_waits_for_a_worker_never_starts(fleet: Fleet) -> None:
    """No worker yet: the run waits in Temporal's queue; cancelled, it ends
    `cancelled` (the server keeps that record itself), and a worker that comes
    later never runs it."""
    collection = setup(fleet)
    tid = collection.run("t")
    with collection.client() as c:
        r = c.post(f"/api/v1/trajectory/{collection.name}/t/statuses", json={tid: "cancelled"})
    assert r.status_code == 200 and r.json()[tid] == "cancelled", r.text
    record = collection.wait("t", tid, timeout=60)
    assert record["status"] == "cancelled" and "before it started" in record["error"], record
    fleet.worker("late")
    later = collection.run("t")
    assert collection.wait("t", later, timeout=60)["status"] == "completed"
    store = fleet.store()
    assert ran_on(store, tid) == [], "the cancelled run never reached a worker"
    store.close()
