"""A 1,000-run experiment on a real `pier serve` (in-process executor, SQLite),
on the fake backend in its rated mode: four cells scripted to succeed 10%, 40%,
70% and 95% of the time. Nothing is lost or repeated, each cell's pass rate
agrees with its scripted rate, and a server SIGKILLed in the middle resumes
after a restart and ends with exactly 1,000 attempts.

No Docker: the fake backend runs nothing. The rates are checked with a 99.9%
Wilson interval (pier reports 95%): with four cells a true rate falls outside
a 95% interval somewhere one time in five, outside these about one in 250."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.api_server import ADMIN_TOKEN, Server

from pier.experiments import stats

pytestmark = pytest.mark.integration

RATES = (0.1, 0.4, 0.7, 0.95)
ATTEMPTS = 250  # x 4 cells = 1,000 runs
RUNBOOK = """---
agent: script
image: pier-fake:latest
snapshot: ""
---
# rated

```bash
echo pier-fake-success-rate={{rate}}
```
"""
SETTINGS = {
    "PIER_SANDBOX_BACKEND": "fake-rated",
    "PIER_MAX_CONCURRENT_RUNS": "16",
    "PIER_EXPERIMENT_POLL_SEC": "0.2",
    "PIER_EXPERIMENT_LEASE_SEC": "3",
    "PIER_SWEEP_FOREIGN": "false",
    "PIER_SWEEP_INTERVAL_SEC": "1",
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    home = tmp_path / "home"
    home.mkdir()
    srv = Server(home=home, db_url=f"sqlite:///{tmp_path / 'pier.db'}", settings=SETTINGS).start()
    yield srv
    srv.stop()


def start(server: Server) -> tuple[httpx.Client, str]:
    with server.client(ADMIN_TOKEN) as admin:
        token = admin.post("/api/v1/collections", json={"name": "scale"}).json()["token"]
    client = server.client(token)
    body = {"name": "scale", "runbook": RUNBOOK, "matrix": {"vars": [{"rate": r} for r in RATES]},
            "attempts": ATTEMPTS, "concurrency": 32, "infra_retries": 3}  # fmt: skip
    r = client.post("/api/v1/experiments/scale", json=body)
    assert r.status_code == 201, r.text
    return client, r.json()["id"]


def read(client: httpx.Client, experiment_id: str) -> dict:
    r = client.get(f"/api/v1/experiments/scale/{experiment_id}")
    assert r.status_code == 200, r.text
    return r.json()


def wait(client: httpx.Client, experiment_id: str, until, timeout: float = 1200) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        found = read(client, experiment_id)
        if until(found):
            return found
        assert time.monotonic() < deadline, f"experiment still at {found['results']['total']}"
        time.sleep(1)


def check_exactly_once(client: httpx.Client, experiment_id: str) -> list[dict]:
    """Every (cell, attempt) has exactly one try that ended other than for an
    infrastructure reason; no run belongs to two tries; every run is labelled."""
    runs = client.get(f"/api/v1/experiments/scale/{experiment_id}/runs").json()
    assert len({r["trajectory_id"] for r in runs}) == len(runs)
    final = Counter((r["cell"], r["attempt"]) for r in runs if r["outcome"] in ("success", "failure"))
    assert len(final) == len(RATES) * ATTEMPTS
    assert set(final.values()) == {1}
    assert {r["status"] for r in runs} <= {"completed", "failed"}
    label = f"pier.experiment={experiment_id}"
    listed = client.get("/api/v1/db/trajectories/scale/scale", params={"label": label, "limit": 1}).json()
    assert listed["total"] == len(runs)
    return runs


def check_rates(found: dict) -> None:
    for cell, rate in zip(found["results"]["cells"], RATES, strict=True):
        assert cell["attempts"] == ATTEMPTS
        interval = stats.wilson(cell["successes"], cell["attempts"], alpha=0.001)
        assert interval is not None and interval.low <= rate <= interval.high, (
            cell["key"],
            cell["successes"],
        )
        low, high = cell["pass_rate_interval"]
        assert low <= cell["pass_rate"] <= high


def test_a_thousand_runs_none_lost_or_repeated_and_rates_as_scripted(server: Server) -> None:
    client, experiment_id = start(server)
    began = time.monotonic()
    half = wait(client, experiment_id, lambda f: f["results"]["total"]["attempts"] >= 200)
    # interleaved: a partial result covers every cell about equally
    ended = [c["attempts"] for c in half["results"]["cells"]]
    assert min(ended) > 0 and max(ended) - min(ended) <= 40, ended
    found = wait(client, experiment_id, lambda f: f["status"] != "running")
    print(f"1,000 runs in {time.monotonic() - began:.0f} s")
    assert found["status"] == "completed"
    runs = check_exactly_once(client, experiment_id)
    assert len(runs) == len(RATES) * ATTEMPTS  # nothing failed for an infrastructure reason: no retry
    check_rates(found)


def test_a_server_killed_in_the_middle_resumes_and_ends_with_exactly_a_thousand(server: Server) -> None:
    client, experiment_id = start(server)
    wait(client, experiment_id, lambda f: f["results"]["total"]["attempts"] >= 300)
    port = server.port
    server.kill()  # SIGKILL: runs in flight, attempts claimed, a lease held
    client.close()
    server.start(port)
    client = server.client(client.headers["Authorization"].split()[-1])
    found = wait(client, experiment_id, lambda f: f["status"] != "running")
    assert found["status"] == "completed"
    runs = check_exactly_once(client, experiment_id)
    total = found["results"]["total"]
    assert total["attempts"] == len(RATES) * ATTEMPTS
    # the runs the kill interrupted failed for an infrastructure reason, were retried and counted apart
    assert total["infra_failures"] == len(runs) - len(RATES) * ATTEMPTS
    check_rates(found)
