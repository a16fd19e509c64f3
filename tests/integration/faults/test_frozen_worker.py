"""A `pier worker` frozen (SIGSTOP) while it holds runs, and thawed (SIGCONT)
later: the decision that it is lost is made elsewhere, within the heartbeat
timeout; once back, it stops what it held, frees its slots and takes new
work; a run frozen before its agent started runs again elsewhere and is never
recorded cancelled."""

from __future__ import annotations

import os
import signal
import time

import pytest
from tests.support.faults import assert_clean, ends_within, fake_fleet, pollers
from tests.support.fleet import Fleet, ran_on, wait_for

pytestmark = pytest.mark.integration

HEARTBEAT_SEC = 5
# Noticing a silent worker: its heartbeat timeout, then the workflow's task
# and one control activity on a server.
LOST_BOUND_SEC = HEARTBEAT_SEC + 15
FROZEN_SEC = 25
SLOW_CREATE_SEC = 50


def freeze(worker) -> None:
    os.kill(worker.proc.pid, signal.SIGSTOP)


def thaw(worker) -> None:
    os.kill(worker.proc.pid, signal.SIGCONT)


def test_a_frozen_worker_is_declared_lost_by_others_and_takes_new_work_once_back(fault_fleet: Fleet) -> None:
    agent_sec = fault_fleet.home / "agent-sec"
    agent_sec.write_text("60")  # the first run's agent runs long, on the worker to freeze
    collection = fake_fleet(fault_fleet, PIER_WORKER_SLOTS="1", PIER_HEARTBEAT_TIMEOUT_SEC=str(HEARTBEAT_SEC),
                            PIER_SCHEDULE_TO_START_SEC="5", PIER_TEST_AGENT_SEC_FILE=str(agent_sec))  # fmt: skip
    frozen = fault_fleet.worker("frozen")
    store = fault_fleet.store()
    doomed = collection.run("t")
    wait_for(lambda: store.get_run(doomed).stage("run_agent").status == "running", 60, "its agent started")
    agent_sec.write_text("1")
    fault_fleet.worker("other")
    control = f"{fault_fleet.queue}-control"
    wait_for(
        lambda: any(p.startswith("serve-") for p in pollers(fault_fleet, control)),
        30,
        "a server polls control",
    )
    # The process that may be frozen must not be the one handed the decision that it is lost.
    assert not {"frozen", "other"} & pollers(fault_fleet, control), pollers(fault_fleet, control)
    freeze(frozen)
    frozen_at = time.monotonic()
    try:
        lost = ends_within(store, [doomed], LOST_BOUND_SEC + 30).records[doomed]
        noticed = time.monotonic() - frozen_at
        assert lost.status.value == "failed" and "worker frozen was lost" in (lost.error or ""), lost.error
        assert noticed < LOST_BOUND_SEC, f"the loss was recorded {noticed:.0f}s after the freeze"
        time.sleep(max(0.0, FROZEN_SEC - (time.monotonic() - frozen_at)))
    finally:
        thaw(frozen)
    # Back: it must take new work again, side by side with the other worker.
    ids = [collection.run("t") for _ in range(8)]
    ends = ends_within(store, ids, 60, fault_fleet)
    assert set(ends.statuses().values()) == {"completed"}, ends.errors()
    where = [ran_on(store, tid)[-1] for tid in ids]
    assert "frozen" in where, f"the thawed worker took none of the new runs: {where}"
    assert store.get_run(doomed).status.value == "failed", "the thawed worker rewrote the lost run's end"
    assert_clean(fault_fleet, store, [doomed, *ids])
    store.close()


# The documented bound on a frozen worker's runs (docs/faults.md): the
# heartbeat timeout, then one workflow task and one control activity on a live
# server; this slack covers those and the heartbeat's own second.
BOUND_SLACK_SEC = 6
FROZEN_RUNS = 4


def test_every_run_of_a_frozen_worker_ends_within_the_heartbeat_timeout_and_a_workflow_task(
    fault_fleet: Fleet,
) -> None:
    """A worker frozen (SIGSTOP) with four agents running, another worker and
    a server live: each run ends failed, naming the lost worker, within the
    heartbeat timeout and a few seconds. The frozen process's open polls are
    handed none of the control work: not the workflow task that reacts to its
    silence (that used to wait out Temporal's workflow task timeout, twice
    when a second open poll took it again), nor a release of its runs."""
    agent_sec = fault_fleet.home / "agent-sec"
    agent_sec.write_text("120")
    collection = fake_fleet(fault_fleet, PIER_WORKER_SLOTS=str(FROZEN_RUNS),
                            PIER_HEARTBEAT_TIMEOUT_SEC=str(HEARTBEAT_SEC), PIER_SCHEDULE_TO_START_SEC="5",
                            PIER_TEST_AGENT_SEC_FILE=str(agent_sec))  # fmt: skip
    frozen = fault_fleet.worker("frozen")
    # it polls before the runs come: their workflow tasks go to it as well as to the server
    wait_for(lambda: "frozen" in pollers(fault_fleet, fault_fleet.queue), 120, "the worker to freeze polls")
    store = fault_fleet.store()
    ids = [collection.run("t") for _ in range(FROZEN_RUNS)]
    wait_for(lambda: all(store.get_run(t).stage("run_agent").status == "running" for t in ids), 90,
             "the agents started on the worker to freeze")  # fmt: skip
    agent_sec.write_text("1")
    fault_fleet.worker("other")
    wait_for(lambda: "other" in pollers(fault_fleet, fault_fleet.queue), 120, "the other worker polls")
    freeze(frozen)
    frozen_at = time.monotonic()
    ended: dict[str, float] = {}
    try:
        while len(ended) < len(ids) and time.monotonic() - frozen_at < HEARTBEAT_SEC + 60:
            for tid in ids:
                if tid not in ended and store.get_run(tid).status.terminal:
                    ended[tid] = time.monotonic() - frozen_at
            time.sleep(0.2)
    finally:
        thaw(frozen)
    records = {tid: store.get_run(tid) for tid in ids}
    for tid, record in records.items():
        assert record.status.value == "failed", (tid, record.status.value, record.error)
        assert "worker frozen was lost" in (record.error or ""), record.error
    times = sorted(round(t, 1) for t in ended.values())
    assert len(times) == len(ids) and times[-1] < HEARTBEAT_SEC + BOUND_SLACK_SEC, (
        f"the frozen worker's runs ended {times}s after the freeze; the bound is "
        f"{HEARTBEAT_SEC}s + {BOUND_SLACK_SEC}s"
    )
    assert_clean(fault_fleet, store, ids)
    store.close()


def test_a_run_frozen_before_its_agent_started_runs_again_elsewhere_and_stays_completed(
    fault_fleet: Fleet,
) -> None:
    # The frozen worker's create outlasts the freeze: once thawed it is told it
    # was declared lost while its sandbox is still being made, and must delete
    # that sandbox when the create returns (no release of the run comes to it).
    collection = fake_fleet(fault_fleet, PIER_WORKER_SLOTS="1", PIER_HEARTBEAT_TIMEOUT_SEC=str(HEARTBEAT_SEC),
                            PIER_SCHEDULE_TO_START_SEC="5", PIER_TEST_CREATE_SEC=str(SLOW_CREATE_SEC))  # fmt: skip
    frozen = fault_fleet.worker("frozen")
    del fault_fleet.settings["PIER_TEST_CREATE_SEC"]
    store = fault_fleet.store()
    tid = collection.run("t")
    wait_for(lambda: store.get_run(tid).stage("create").status == "running", 60, "its sandbox is being made")
    freeze(frozen)
    frozen_at = time.monotonic()
    try:
        fault_fleet.worker("other")
        record = ends_within(store, [tid], 90, fault_fleet).records[tid]
        assert record.status.value == "completed", record.error
        time.sleep(max(0.0, FROZEN_SEC - 10))
    finally:
        thaw(frozen)
    time.sleep(10)  # the thawed worker finds its attempt gone
    time.sleep(max(0.0, SLOW_CREATE_SEC + 3 - (time.monotonic() - frozen_at)))  # and its create has returned
    record = store.get_run(tid)
    assert record.status.value == "completed", (
        f"after the thaw the run was recorded {record.status.value}: {record.error}"
    )
    assert ran_on(store, tid) == ["frozen", "other"]
    assert_clean(fault_fleet, store, [tid])
    store.close()
