"""A server that dies (SIGKILL) or is stopped (SIGTERM) mid-run: nothing accepted
is lost. The interrupted run fails saying why, its sandbox goes, and the runs
that were waiting start once the server is back."""

from __future__ import annotations

import signal
import time

import pytest
from tests.support.api_server import Collection, Server, make_collection

from pier.sandbox.base import LABEL_COLLECTION, LABEL_RUN, Limits, SandboxSpec

pytestmark = pytest.mark.integration


@pytest.fixture
def one_slot(new_db, tmp_path, docker_backend, base_image):
    settings = {"PIER_MAX_CONCURRENT_RUNS": "1", "PIER_SWEEP_INTERVAL_SEC": "1"}
    server = Server(home=tmp_path / "home", db_url=new_db(), settings=settings)
    server.home.mkdir()
    yield server.start()
    server.stop()


def running_with_sandbox(collection: Collection, task: str, tid: str, backend) -> str:
    collection.wait(
        task,
        tid,
        done=lambda r: (
            r["status"] == "running" and r["steps"]["run"]["outputs"]["stages"][3]["status"] == "running"
        ),
    )
    deadline = time.monotonic() + 30
    while True:
        found = [s for s in collection.sandboxes(backend) if s.labels.get("pier.run") == tid]
        if found:
            return found[0].id
        assert time.monotonic() < deadline, "the run has no sandbox"
        time.sleep(0.2)


def gone(backend, sandbox_id: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while any(s.id == sandbox_id for s in backend.list_sandboxes()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_killed_server_fails_the_running_run_and_resumes_the_pending(
    one_slot: Server, base_image, docker_backend
):
    collection = make_collection(one_slot, base_image, prefix="restart")
    collection.put_task("slow", "echo started\nsleep 300\necho never > {{results_dir}}/x")
    collection.put_task("quick", "echo ok > {{results_dir}}/ok.txt")
    slow = collection.run("slow")
    sandbox = running_with_sandbox(collection, "slow", slow, docker_backend)
    waiting = [collection.run("quick") for _ in range(2)]
    dropped = collection.run("quick")
    with collection.client() as c:  # cancelled while waiting: it never starts
        assert c.post(
            f"/api/v1/trajectory/{collection.name}/quick/statuses", json={dropped: "cancelled"}
        ).json() == {dropped: "cancelled"}
    assert collection.record("quick", dropped)["status"] == "cancelled"
    assert [collection.record("quick", t)["status"] for t in waiting] == ["pending", "pending"]

    one_slot.kill()
    assert any(s.id == sandbox for s in docker_backend.list_sandboxes()), "SIGKILL leaves the sandbox"
    one_slot.start()

    record = collection.wait("slow", slow, timeout=30)
    assert record["status"] == "failed" and record["steps"]["run"]["outputs"]["success"] is False
    assert record["error"] == "the server stopped while this run was running; run it again"
    assert record["failed_stage"] == "run_agent"
    assert gone(docker_backend, sandbox), "the interrupted run's sandbox was not swept"
    for tid in waiting:
        assert collection.wait("quick", tid, timeout=120)["status"] == "completed"
    assert collection.record("quick", dropped)["status"] == "cancelled"
    assert not collection.sandboxes(docker_backend)


def test_stopped_server_ends_its_running_run_and_deletes_its_sandbox(
    one_slot: Server, base_image, docker_backend
):
    collection = make_collection(one_slot, base_image, prefix="stop")
    collection.put_task("slow", "echo started\nsleep 300\necho never > {{results_dir}}/x")
    collection.put_task("quick", "echo ok > {{results_dir}}/ok.txt")
    slow = collection.run("slow")
    sandbox = running_with_sandbox(collection, "slow", slow, docker_backend)
    later = collection.run("quick")
    one_slot.stop()  # SIGTERM; SIGKILL only if it has not exited 30 s later
    assert one_slot.proc.returncode != -signal.SIGKILL, "pier serve did not stop on SIGTERM"
    assert gone(docker_backend, sandbox, timeout=5)
    one_slot.start()
    record = collection.record("slow", slow)
    assert record["status"] == "failed" and "server stopped" in record["error"]
    assert collection.wait("quick", later)["status"] == "completed"


def test_the_server_sweeps_on_a_schedule(one_slot: Server, base_image, docker_backend):
    """A sandbox that outlives its run (here: a second one made by hand with the
    run's labels while it runs) is removed by the periodic sweep once the run
    has ended, with no restart; and kept while the run runs. A control sandbox
    of a run that has already ended shows a sweep has run before the "kept" is
    asserted (otherwise it would pass just as well with no sweep at all)."""
    collection = make_collection(one_slot, base_image, prefix="sweep")
    collection.put_task("quick", "echo ok > {{results_dir}}/ok.txt")
    collection.put_task("slow", "echo started\nsleep 300\necho never > {{results_dir}}/x")
    ended = collection.run("quick")
    assert collection.wait("quick", ended)["status"] == "completed"
    tid = collection.run("slow")
    running_with_sandbox(collection, "slow", tid, docker_backend)

    labels = {LABEL_RUN: tid, LABEL_COLLECTION: collection.name}
    spec = SandboxSpec(image=base_image, limits=Limits(cpus=1, memory="256M"), labels=labels)
    leftover = docker_backend.create(spec)  # kept while its run runs: its owner (this test) is alive
    # The control is only created, never started: the sweep may remove it at once
    # without racing a start-up.
    control = docker_backend.api.create_container(
        base_image,
        command=["sleep", "infinity"],
        labels={LABEL_RUN: ended, LABEL_COLLECTION: collection.name},
    )["Id"]
    try:
        assert gone(docker_backend, control, timeout=120), "no sweep removed the ended run's sandbox"
        assert not gone(docker_backend, leftover.id, timeout=0), "swept while its run was running"
        with collection.client() as c:
            c.post(f"/api/v1/trajectory/{collection.name}/slow/statuses", json={tid: "cancelled"})
        assert collection.wait("slow", tid)["status"] == "cancelled"
        assert gone(docker_backend, leftover.id, timeout=120), "the periodic sweep did not remove it"
    finally:
        leftover.delete()
        docker_backend.remove(control)


def test_sigterm_drains_a_run_in_flight_and_refuses_new_ones(new_db, tmp_path, docker_backend, base_image):
    """A rolling restart fails no run: on SIGTERM the server refuses new runs
    (503 with Retry-After), says it is not ready, lets the run in flight finish
    and store its result, and only then exits; what is queued stays for the
    next start."""
    settings = {"PIER_MAX_CONCURRENT_RUNS": "1", "PIER_DRAIN_TIMEOUT_SEC": "120"}
    server = Server(home=tmp_path / "home", db_url=new_db(), settings=settings)
    server.home.mkdir()
    server.start()
    try:
        collection = make_collection(server, base_image, prefix="drain")
        collection.put_task("slow", "echo started\nsleep 8\necho finished > {{results_dir}}/out.txt")
        slow = collection.run("slow")
        sandbox = running_with_sandbox(collection, "slow", slow, docker_backend)
        queued = collection.run("slow")  # one slot: this one waits
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        with collection.client() as c:
            while True:  # the signal is handled asynchronously: the first refusal comes within moments
                refused = c.post(f"/api/v1/run/{collection.name}/slow", json={})
                if refused.status_code == 503 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert refused.status_code == 503, refused.text
            assert int(refused.headers["Retry-After"]) > 0
            assert "shutting down (SIGTERM)" in refused.json()["detail"]
            ready = c.get("/health/ready")
            assert ready.status_code == 503 and "SIGTERM" in ready.json()["draining"]
            assert c.get(f"/api/v1/db/trajectory/{collection.name}/slow/{slow}").json()["status"] == "running"
        server.proc.wait(60)
        assert server.proc.returncode != -signal.SIGKILL
        assert gone(docker_backend, sandbox, timeout=5)
        server.start()
        record = collection.record("slow", slow)
        assert record["status"] == "completed", record.get("error")
        with collection.client() as c:
            out = c.get(f"/api/v1/file/{collection.name}/slow/{slow}/results/out.txt")
        assert out.status_code == 200 and out.text == "finished\n", out.text
        assert collection.wait("slow", queued)["status"] == "completed"  # kept queued for this start
    finally:
        server.stop()
