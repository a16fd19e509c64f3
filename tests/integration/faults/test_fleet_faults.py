"""A fleet (one `pier serve`, `pier worker`s, Temporal, PostgreSQL) under the
faults of real operation: a server restarted while runs are pending, the
database stopped for 20 s, Temporal down when runs are submitted. Each test
asserts every run's end within a bound it states, with the true reason, none
duplicated, no sandbox left."""

from __future__ import annotations

import time

import httpx
import pytest
from tests.support.faults import assert_clean, ends_within, fake_fleet, pollers
from tests.support.fleet import Fleet, ran_on, wait_for
from tests.support.private import Postgres, Temporal

pytestmark = pytest.mark.integration

# A run that waits for nothing but a worker ends this long after one is up.
RUN_BOUND_SEC = 60


def test_a_server_restarted_with_pending_runs_starts_and_they_all_run_once(fault_fleet: Fleet) -> None:
    """No worker is up; 3 runs are accepted; the server is SIGKILLed and
    started again: it comes up (it used to fail its start on the pending runs),
    and once a worker starts, each run completes, on one worker."""
    collection = fake_fleet(fault_fleet)
    ids = [collection.run("t") for _ in range(3)]
    server = collection.server
    server.kill()
    server.start(port=server.port)  # raises when "Application startup failed"
    with httpx.Client(base_url=server.url, timeout=10) as c:
        assert c.get("/health").status_code == 200
    fault_fleet.worker("w1")
    store = fault_fleet.store()
    ends = ends_within(store, ids, RUN_BOUND_SEC)
    assert set(ends.statuses().values()) == {"completed"}, ends.errors()
    assert all(ran_on(store, tid) == ["w1"] for tid in ids)
    assert_clean(fault_fleet, store, ids)
    store.close()


# A database outage shorter than PIER_DB_RETRY_SEC costs a run a pause: it
# completes within its own time plus the outage plus this.
OUTAGE_SEC = 20
AFTER_OUTAGE_BOUND_SEC = 60


def test_runs_ride_out_a_20s_database_outage(fault_fleet: Fleet, private_pg: Postgres) -> None:
    """5 runs log a line a second; PostgreSQL is stopped (immediate, as on a
    crash) for 20 s while they do. Every run completes with every line of its
    log (they used to fail within a second and stay `running` for good)."""
    lines = 30  # the agents log through the whole outage (it starts at their third line)
    collection = fake_fleet(fault_fleet, PIER_TEST_AGENT_LINES=str(lines), PIER_TEST_LINE_SEC="1",
                            PIER_WORKER_SLOTS="3", PIER_HEARTBEAT_TIMEOUT_SEC="15")  # fmt: skip
    fault_fleet.worker("w1")
    fault_fleet.worker("w2")
    ids = [collection.run("t") for _ in range(5)]
    store = fault_fleet.store()
    wait_for(lambda: all(store.last_seq(t) and any(e.line == "tick 3" for e in store.events(t)) for t in ids),
             90, "every run's agent logs")  # fmt: skip
    store.close()
    private_pg.stop()
    time.sleep(OUTAGE_SEC)
    private_pg.start()
    store = fault_fleet.store()
    ends = ends_within(store, ids, lines + AFTER_OUTAGE_BOUND_SEC)
    assert set(ends.statuses().values()) == {"completed"}, ends.errors()
    for tid in ids:
        ticks = [e.line for e in store.events(tid) if e.line.startswith("tick ")]
        assert ticks == [f"tick {n}" for n in range(1, lines + 1)], f"run {tid}'s log lost or repeated lines"
    assert_clean(fault_fleet, store, ids)
    store.close()


def test_temporal_down_refuses_runs_with_nothing_stored_and_a_keyed_retry_makes_one_run(
    fault_fleet: Fleet, private_temporal: Temporal
) -> None:
    """Temporal is killed: /health/ready says so (503), POST /run answers 503
    within the submit timeout and leaves no run behind (it used to answer 500
    and keep a pending run no one would start). A worker started meanwhile
    waits for Temporal (it used to exit), and the one that was polling polls
    again once Temporal is back. Then the client's retry with the same
    Idempotency-Key makes one run, which a worker runs at once, and a second
    retry gets that run back."""
    collection = fake_fleet(fault_fleet, PIER_SUBMIT_TIMEOUT_SEC="5")
    fault_fleet.worker("w1")
    wait_for(lambda: "w1" in pollers(fault_fleet, fault_fleet.queue), 60, "w1 polls")
    private_temporal.kill()
    late = fault_fleet.worker("w2")  # starts while Temporal is down
    key = {"Idempotency-Key": "order-42"}
    with collection.client() as c:
        ready = c.get("/health/ready")
        assert ready.status_code == 503 and ready.json()["temporal"] != "ok", ready.text
        began = time.monotonic()
        refused = c.post(f"/api/v1/run/{collection.name}/t", json={}, headers=key)
        took = time.monotonic() - began
        assert refused.status_code == 503, refused.text
        assert "Temporal does not answer" in refused.json()["detail"]
        assert took < 5 + 5, f"refused after {took:.0f}s"
    store = fault_fleet.store()
    assert store.list_runs(collection=collection.name)[1] == 0, "a refused run was left stored"
    time.sleep(3)
    assert late.proc.poll() is None, f"w2 exited while Temporal was down:\n{late.log_tail()}"
    private_temporal.start()
    wait_for(lambda: {"w1", "w2"} <= pollers(fault_fleet, fault_fleet.queue), 30, "both workers poll again")
    with collection.client() as c:
        wait_for(lambda: c.get("/health/ready").status_code == 200, 60, "the server is ready again")
        first = c.post(f"/api/v1/run/{collection.name}/t", json={}, headers=key)
        again = c.post(f"/api/v1/run/{collection.name}/t", json={}, headers=key)
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    tid = first.json()["trajectory_id"]
    assert again.json()["trajectory_id"] == tid, "a retry with the same key made a second run"
    ends = ends_within(store, [tid], RUN_BOUND_SEC, fault_fleet)
    assert ends.statuses() == {tid: "completed"}, ends.errors()
    assert [r.trajectory_id for r in store.list_runs(collection=collection.name)[0]] == [tid]
    assert_clean(fault_fleet, store, [tid])
    store.close()


def test_a_server_started_while_temporal_is_down_serves_and_connects_once_it_is_back(
    fault_fleet: Fleet, private_temporal: Temporal
) -> None:
    """Temporal is down when `pier serve` starts: the server starts and serves
    (it used to fail its start), live 200, ready 503 naming Temporal, POST /run
    503 with nothing stored; once Temporal is up, it connects by itself and a
    run completes on a worker."""
    private_temporal.kill()
    collection = fake_fleet(fault_fleet, PIER_SUBMIT_TIMEOUT_SEC="5")
    with collection.client() as c:
        assert c.get("/health/live").status_code == 200
        ready = c.get("/health/ready")
        assert ready.status_code == 503, ready.text
        assert "Temporal" in ready.json()["temporal"] and ready.json()["database"] == "ok", ready.text
        refused = c.post(f"/api/v1/run/{collection.name}/t", json={})
        assert refused.status_code == 503, refused.text
        assert "Temporal does not answer" in refused.json()["detail"]
    store = fault_fleet.store()
    assert store.list_runs(collection=collection.name)[1] == 0, "a refused run was left stored"
    private_temporal.start()
    began = time.monotonic()
    with collection.client() as c:
        wait_for(lambda: c.get("/health/ready").status_code == 200, 60, "the server connects to Temporal")
    connected_after = time.monotonic() - began
    fault_fleet.worker("w1")
    tid = collection.run("t")
    ends = ends_within(store, [tid], RUN_BOUND_SEC)
    assert ends.statuses() == {tid: "completed"}, ends.errors()
    assert_clean(fault_fleet, store, [tid])
    store.close()
    assert connected_after < 35, f"connected {connected_after:.0f}s after Temporal came back"
