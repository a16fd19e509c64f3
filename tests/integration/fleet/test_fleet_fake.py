"""The fleet's orchestration on the fake sandbox backend (no Docker): runs go
through Temporal to `pier worker` processes, spread, survive a worker lost
before their agent starts, fail naming the worker lost after, and cancel."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from tests.support.api_server import Collection, make_collection
from tests.support.faults import events
from tests.support.fleet import FAKE_BACKEND, Fleet, Follower, history_json, ran_on, wait_for
from tests.support.fleet_backend import sandboxes_left

from pier.lifecycle.orphans import end_orphaned_runs
from pier.record import RunStatus
from pier.settings import Settings

SCALE_RUNS = int(os.environ.get("PIER_TEST_FLEET_RUNS", "1000"))  # the orchestration-scale figure


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
    # Any pier process on this host (a sweep, `pier runs`) ends the runs whose
    # owner process is gone; a fleet run's fate is its workflow's, not a pid's.
    assert end_orphaned_runs(store, Settings(database_url=fleet.db_url)) == []
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
    followed = Follower(server, token, tid, after=after).follow()
    assert followed.broken is None, followed.broken
    return followed.seqs, followed.end


def ticks(seen) -> list[int]:
    """The numbers of the agent's `tick N` lines among what a follower saw, in order."""
    return [int(s.line.split()[1]) for s in seen if s.line.startswith("tick ")]


def test_a_workers_lines_reach_a_follower_on_a_replica_in_order_with_no_gaps(fleet: Fleet) -> None:
    """The agent logs on a worker; a follower on another server than the one
    the run was submitted to gets every line of the run once, in order, while
    it is logged, and then the run's end."""
    lines = 200
    collection = setup(fleet, PIER_TEST_AGENT_LINES=str(lines), PIER_TEST_LINE_SEC="0.01")
    replica = fleet.server()
    fleet.worker("w1")
    tid = collection.run("t")
    followed = Follower(replica, collection.token, tid).follow()
    assert followed.broken is None and followed.end == "completed", (followed.broken, followed.end)
    store = fleet.store()
    every = [e.seq for e in store.events(tid)]
    store.close()
    assert followed.seqs == every == list(range(1, len(every) + 1)), (
        "a line was missed, repeated or reordered"
    )
    assert ticks(followed.seen) == list(range(1, lines + 1))
    live = [s for s in followed.seen if s.line.startswith("tick ") and s.ts > followed.connected]
    assert live, "no line reached the follower while the agent was logging"


def on_another_host(store, tid: str) -> None:
    """Make the run's owner a worker process on another host, as in a real
    fleet: a server cannot judge such an owner, and a server that took every
    running run it cannot judge for its own dead one (the one-machine rule)
    would fail it at start. The worker writes its record again only at its
    next stage, after the agent."""
    record = store.get_run(tid)
    record.owner = "another-host:4242:1"
    store.save_run(record)


def test_a_restarted_server_fails_no_run_and_its_follower_misses_no_line(fleet: Fleet) -> None:
    """The only server dies while a worker's agent logs; the lines logged
    meanwhile are kept; the server starts again on the same port and leaves the
    run running; the follower, resuming with Last-Event-ID, gets every line
    once, and the run completes."""
    lines = 400  # 40 s of logging: the run outlives the server's restart
    collection = setup(fleet, PIER_TEST_AGENT_LINES=str(lines), PIER_TEST_LINE_SEC="0.1")
    fleet.worker("w1")
    tid = collection.run("t")
    server, store = collection.server, fleet.store()
    first = Follower(server, collection.token, tid).start()
    wait_for(lambda: len(ticks(first.seen)) >= 10, 90, "the follower got the agent's first lines")
    server.kill()
    first.join()
    assert first.broken is not None and first.end is None, "the follower lost its server"
    heard = first.seqs[-1]
    wait_for(lambda: store.last_seq(tid) >= heard + 10, 60, "the worker logged on while no server ran")
    on_another_host(store, tid)
    server.start(port=server.port)
    record = store.get_run(tid)
    assert record.status == RunStatus.running and record.error is None, (
        "the restarted server left the run alone"
    )
    assert store.get_run(tid).stage("run_agent").status == "running", (
        "the agent still runs: the check meant something"
    )
    second = Follower(server, collection.token, tid, after=heard).follow()
    assert second.broken is None and second.end == "completed", (second.broken, second.end)
    every = [e.seq for e in store.events(tid)]
    store.close()
    assert first.seqs + second.seqs == every == list(range(1, len(every) + 1)), (
        "a line was missed or repeated"
    )
    assert ticks(first.seen + second.seen) == list(range(1, lines + 1))


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


def busy_worker_with_a_second_run(fleet: Fleet) -> tuple[Collection, str, str]:
    """One worker, one slot, busy with a long run; a second run submitted."""
    agent_sec = fleet.home / "agent-sec"
    agent_sec.write_text("20")
    collection = setup(fleet, PIER_WORKER_SLOTS="1", PIER_TEST_AGENT_SEC_FILE=str(agent_sec))
    fleet.worker("w1")
    long = collection.run("t")
    store = fleet.store()
    wait_for(lambda: store.get_run(long).stage("run_agent").status == "running", 60, "the long run's agent")
    store.close()
    agent_sec.write_text("0")
    return collection, long, collection.run("t")


def run_scheduled(fleet: Fleet, tid: str) -> bool:
    return '"pier.run"' in history_json(fleet.address, "default", tid)


def test_a_busy_worker_holds_the_next_run_in_its_stage_so_its_slot_takes_it_at_once(fleet: Fleet) -> None:
    """The worker takes one claim beyond its slots: the next run's claim and
    the workflow's round trips to its stage (`run`) happen while the slot is
    busy (they used to start only once it was free), and the run waits in it."""
    _collection, long, queued = busy_worker_with_a_second_run(fleet)
    wait_for(lambda: run_scheduled(fleet, queued), 15, "the queued run's stage is on the busy worker")
    store = fleet.store()
    assert store.get_run(long).status.value == "running", "the slot was not busy"
    assert store.get_run(queued).status.value == "pending", "the queued run started beyond the slots"
    ends = all_ended(fleet, [long, queued], 60)
    assert set(ends.values()) == {"completed"}, ends
    assert ran_on(store, queued) == ["w1"]
    store.close()


def test_a_run_cancelled_while_it_waits_in_its_stage_for_a_slot_ends_cancelled(fleet: Fleet) -> None:
    """Cancelled while it waits on the busy worker for a slot, the run ends
    `cancelled` without starting (it used to stay pending), and the busy run
    completes."""
    collection, long, queued = busy_worker_with_a_second_run(fleet)
    wait_for(lambda: run_scheduled(fleet, queued), 15, "the queued run's stage is on the busy worker")
    with collection.client() as c:
        r = c.post(f"/api/v1/trajectory/{collection.name}/t/statuses", json={queued: "cancelled"})
    assert r.status_code == 200, r.text
    record = collection.wait("t", queued, timeout=30)
    assert record["status"] == "cancelled" and "before it started" in record["error"], record
    store = fleet.store()
    assert store.get_run(long).status.value == "running", "the cancel reached the wrong run"
    assert all_ended(fleet, [long], 60) == {long: "completed"}
    assert ran_on(store, queued) == [], "the cancelled run started"
    store.close()


def test_a_completed_run_costs_two_activities_no_release(fleet: Fleet) -> None:
    """The lifecycle is one activity (`run`: no workflow task and no dispatch
    between its first stages and the agent), and it lets the run go itself
    (its sandbox is deleted, its slot free), so the workflow schedules no
    release after it."""
    collection = setup(fleet)
    fleet.worker("w1")
    tid = collection.run("t")
    assert collection.wait("t", tid, timeout=60)["status"] == "completed"
    wait_for(lambda: events(fleet, tid)[-1] == "WORKFLOW_EXECUTION_COMPLETED", 30, "the workflow ended")
    history = events(fleet, tid)
    scheduled = [e.split("(")[1].split("@")[0] for e in history if e.startswith("ACTIVITY_TASK_SCHEDULED")]
    assert scheduled == ["pier.claim", "pier.run"], history
    assert history.count("WORKFLOW_TASK_COMPLETED") == 3, history


def test_a_worker_stopped_by_sigterm_finishes_its_run_and_hands_back_the_rest(fleet: Fleet) -> None:
    """A rolling upgrade of the workers fails no run: the run in flight on a
    worker that gets SIGTERM finishes there, the run it had claimed and not
    started goes back to the fleet (another worker runs it), and the worker
    then exits by itself."""
    collection = setup(fleet, PIER_TEST_AGENT_SEC="8", PIER_WORKER_SLOTS="1", PIER_DRAIN_TIMEOUT_SEC="120")
    leaving = fleet.worker("leaving")
    store = fleet.store()
    first = collection.run("t")
    wait_for(lambda: store.get_run(first).stage("run_agent").status == "running", 60, "the agent started")
    second = collection.run("t")  # claimed ahead (one slot, one prefetch): it waits on `leaving`
    time.sleep(2)
    leaving.proc.send_signal(signal.SIGTERM)
    fleet.settings["PIER_TEST_AGENT_SEC"] = "0"
    fleet.worker("staying")
    assert collection.wait("t", first, timeout=60)["status"] == "completed"
    assert ran_on(store, first) == ["leaving"]
    assert collection.wait("t", second, timeout=90)["status"] == "completed"
    assert ran_on(store, second)[-1] == "staying"
    assert leaving.proc.wait(60) == 0 or leaving.proc.returncode == -signal.SIGTERM, leaving.log_tail()
    assert "draining" in leaving.log_tail(80)
    store.close()


DRAIN_SEC = 3
# SIGTERM to the run's end when the drain runs out: the drain, then the
# lifecycle stopped (its sandbox deleted, the record saved), a few seconds
DRAIN_END_BOUND_SEC = DRAIN_SEC + 15


def test_a_worker_whose_drain_runs_out_ends_its_run_naming_the_shutdown(fleet: Fleet) -> None:
    """SIGTERM to a worker whose run's agent runs longer than
    PIER_DRAIN_TIMEOUT_SEC: once the drain runs out the run ends failed with
    a reason naming the worker's shutdown (it used to be failed later by a
    server, as a workflow that ended without recording the run's end), its
    sandbox is deleted, and the worker exits."""
    collection = setup(fleet, PIER_TEST_AGENT_SEC="300", PIER_WORKER_SLOTS="1",
                       PIER_DRAIN_TIMEOUT_SEC=str(DRAIN_SEC),
                       PIER_TEST_SANDBOX_MARKS=str(fleet.home / "sandboxes"))  # fmt: skip
    leaving = fleet.worker("leaving")
    store = fleet.store()
    tid = collection.run("t")
    wait_for(lambda: store.get_run(tid).stage("run_agent").status == "running", 90, "the agent started")
    leaving.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    record = wait_for(lambda: (r := store.get_run(tid)).status.terminal and r, DRAIN_END_BOUND_SEC + 60,
                      "the run ended")  # fmt: skip
    took = time.monotonic() - signalled
    assert record.status == RunStatus.failed, (record.status, record.error)
    assert record.error and record.error.startswith("worker leaving stopped on SIGTERM (a shutdown)"), (
        record.error
    )
    assert f"PIER_DRAIN_TIMEOUT_SEC ({DRAIN_SEC}s)" in record.error, record.error
    assert record.outcome == "infra" and record.failed_stage == "run_agent", (
        record.outcome,
        record.failed_stage,
    )
    assert took < DRAIN_END_BOUND_SEC, f"the run ended {took:.0f}s after SIGTERM"
    assert leaving.proc.wait(60) == 0, leaving.log_tail()
    assert any("stopped on SIGTERM" in e.line for e in store.events(tid)), "its log says why it ended"
    wait_for(lambda: not sandboxes_left(fleet.home / "sandboxes"), 30, "its sandbox deleted")
    wait_for(lambda: events(fleet, tid)[-1] == "WORKFLOW_EXECUTION_COMPLETED", 30, "its workflow ended")
    store.close()


def test_a_second_worker_with_the_same_identity_is_warned(fleet: Fleet) -> None:
    collection = setup(fleet)
    fleet.worker("twin")
    ran = collection.run("t")  # the first twin polls the shared queue (and takes this run)
    assert collection.wait("t", ran, timeout=60)["status"] == "completed"
    second = fleet.worker("twin")  # the twins share a log file: it is named after the identity
    wait_for(lambda: second.log_tail(200).count("pier worker twin:") == 2, 60, "the second twin started")
    log = second.log_tail(200)
    assert log.count("another worker with identity twin polled") == 1, log
    assert log.index("another worker with identity") > log.index("pier worker twin:"), (
        "the second one says it"
    )
    other = fleet.worker("single")
    wait_for(lambda: "pier worker single:" in other.log_tail(80), 60, "the other worker started")
    assert "another worker with identity" not in other.log_tail(80)


def test_a_worker_logs_json_lines_carrying_its_runs_ids(fleet: Fleet) -> None:
    collection = setup(fleet, PIER_LOG_FORMAT="json")
    worker = fleet.worker("json")
    tid = collection.run("t")
    assert collection.wait("t", tid, timeout=60)["status"] == "completed"
    worker.stop()
    lines = [json.loads(line) for line in worker.log_path.read_text().splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    mine = [line for line in lines if line.get("run_id") == tid]
    assert mine and all(line["collection"] == collection.name for line in mine)
