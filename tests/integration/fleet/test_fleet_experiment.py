"""An experiment on the fleet: its runs go through Temporal to three `pier
worker` processes, on the fake backend in its rated mode (no Docker); one
worker is SIGKILLed in the middle. Every (cell, attempt) ends exactly once
with the agent's outcome, runs the lost worker held are counted as
infrastructure failures and retried, and each cell's pass rate agrees with its
scripted rate (99.9% Wilson interval, as in the in-process scale test)."""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter

import pytest
from tests.support.api_server import make_collection
from tests.support.fleet import Fleet, wait_for

from pier.experiments import stats

pytestmark = pytest.mark.integration

RATES = (0.2, 0.5, 0.8, 0.95)
ATTEMPTS = int(os.environ.get("PIER_TEST_EXPERIMENT_FLEET_RUNS", "1000")) // len(RATES)
RUNBOOK_SCRIPT = "echo pier-fake-success-rate={{rate}}"


def test_an_experiment_across_three_workers_survives_a_lost_worker(fleet: Fleet) -> None:
    fleet.queue = f"exp-{uuid.uuid4().hex[:10]}"
    fleet.settings.update({
        "PIER_SANDBOX_BACKEND": "fake-rated", "PIER_WORKER_SLOTS": "4", "PIER_HEARTBEAT_TIMEOUT_SEC": "15",
        "PIER_EXPERIMENT_POLL_SEC": "0.5",
    })  # fmt: skip
    server = fleet.server()
    collection = make_collection(server, "pier-fake:latest", prefix="fleetexp")
    collection.put_task("rated", RUNBOOK_SCRIPT)
    workers = [fleet.worker(name) for name in ("w1", "w2", "w3")]
    body = {"name": "fleet", "task": "rated", "attempts": ATTEMPTS, "concurrency": 12, "infra_retries": 3,
            "matrix": {"vars": [{"rate": r} for r in RATES]}}  # fmt: skip
    with collection.client() as client:
        r = client.post(f"/api/v1/experiments/{collection.name}", json=body)
        assert r.status_code == 201, r.text
        path = f"/api/v1/experiments/{collection.name}/{r.json()['id']}"

        def read() -> dict:
            return client.get(path).json()

        third = len(RATES) * ATTEMPTS // 3
        wait_for(lambda: read()["results"]["total"]["attempts"] >= third, 900, "a third ended", interval=1)
        workers[0].kill()  # SIGKILL, mid-experiment: its runs in flight are lost with it
        began = time.monotonic()
        found = wait_for(lambda: (f := read())["status"] != "running" and f, 60 + len(RATES) * ATTEMPTS * 2,
                         "the experiment ended", interval=1)  # fmt: skip
        runs = client.get(path + "/runs").json()
    assert found["status"] == "completed", found["results"]["total"]
    final = Counter((r["cell"], r["attempt"]) for r in runs if r["outcome"] in ("success", "failure"))
    assert len(final) == len(RATES) * ATTEMPTS and set(final.values()) == {1}
    assert len({r["trajectory_id"] for r in runs}) == len(runs)
    total = found["results"]["total"]
    assert total["attempts"] == len(RATES) * ATTEMPTS
    assert total["infra_failures"] == len(runs) - len(RATES) * ATTEMPTS
    for cell, rate in zip(found["results"]["cells"], RATES, strict=True):
        interval = stats.wilson(cell["successes"], cell["attempts"], alpha=0.001)
        assert interval is not None and interval.low <= rate <= interval.high, (
            cell["key"],
            cell["successes"],
        )
    print(f"{len(runs)} runs for {len(RATES) * ATTEMPTS} attempts on 3 workers (one lost); "
          f"{total['infra_failures']} infrastructure failures retried; {time.monotonic() - began:.0f} s after the loss")  # fmt: skip
