"""The fleet on the real Docker engine: a `pier serve` (PIER_EXECUTOR=temporal)
and three `pier worker`s with distinct identities on one engine and one
PostgreSQL. Runs spread over the workers; a worker SIGKILLed mid-agent fails
its run naming it while the others complete, and the host's sweep leaves no
sandbox; Temporal's history holds no secret."""

from __future__ import annotations

import hashlib
import os

import pytest
from tests.support.api_server import make_collection
from tests.support.fleet import Fleet, history_json, ran_on, wait_for

from pier.lifecycle.background import sweep_once
from pier.record import RunStatus
from pier.settings import Settings

pytestmark = pytest.mark.integration

SPREAD_RUNS = int(os.environ.get("PIER_TEST_FLEET_DOCKER_RUNS", "9"))
SECRET = "s3cr3t-" + "q" * 24

SCRIPT = """printf %s "$TOKEN" | sha256sum | cut -d' ' -f1 > /app/results/token.sha256"""


@pytest.mark.parametrize("runs", [SPREAD_RUNS])
def test_three_workers_share_runs_survive_a_killed_one_and_keep_secrets(
    fleet: Fleet, base_image: str, docker_backend, runs: int
) -> None:
    fleet.settings["PIER_WORKER_SLOTS"] = "1"
    server = fleet.server()
    collection = make_collection(server, base_image, prefix="fleet")
    collection.put_task("t", SCRIPT)
    collection.put_task("slow", "sleep 120; " + SCRIPT)
    store = fleet.store()

    # A slow run first, on the worker that is to die: alone, it takes it.
    doomed = fleet.worker("doomed")
    slow = collection.run("slow", secret_params={"TOKEN": SECRET})
    wait_for(
        lambda: store.get_run(slow).stage("run_agent").status == "running", 180, "the slow agent started"
    )
    for name in ("w1", "w2", "w3"):
        fleet.worker(name)
    doomed.kill()
    ids = [collection.run("t", secret_params={"TOKEN": SECRET}) for _ in range(runs)]

    lost = collection.wait("slow", slow, timeout=120)
    assert lost["status"] == "failed" and "worker doomed was lost" in lost["error"], lost
    for tid in ids:
        record = collection.wait("t", tid, timeout=300)
        assert record["status"] == RunStatus.completed.value, record["error"]
    where = {w for tid in ids for w in ran_on(store, tid)}
    assert where == {"w1", "w2", "w3"}, f"the runs ran on {where}"

    # the secret reached every sandbox, and never Temporal's history
    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    run_dir = fleet.home / "storage"
    assert sum(1 for f in run_dir.rglob("token.sha256") if f.read_text().strip() == digest) == runs
    for tid in [slow, *ids[:3]]:
        history = history_json(fleet.address, "default", tid)
        assert tid in history and SECRET not in history

    # the host's sweep removes what the dead worker left
    assert len(collection.sandboxes(docker_backend)) == 1, "the dead worker's sandbox is left to sweep"
    settings = Settings(database_url=fleet.db_url, sweep_foreign=False, sweep_grace_sec=0)
    sweep_once(lambda: docker_backend, store, settings)
    assert collection.sandboxes(docker_backend) == []
    store.close()
