"""The experiment routes on a whole app in this process (TestClient runs its
lifespan: the in-process executor and the experiment poller), on SQLite and
the fake backend in its rated mode: each cell's runs succeed at the rate its
vars name. No Docker, no server process."""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pier.api.app import create_app
from pier.settings import Settings

ADMIN = "admin-" + "e" * 40
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


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        home=tmp_path / "home", sandbox_backend="fake-rated", admin_token=ADMIN,
        max_concurrent_runs=6, experiment_poll_sec=0.1, sweep_foreign=False,
    )  # fmt: skip
    with TestClient(create_app(settings)) as c:
        yield c


def collection(client: TestClient, name: str) -> dict[str, str]:
    r = client.post("/api/v1/collections", json={"name": name}, headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


def definition(**fields: object) -> dict:
    return {"name": "rates", "runbook": RUNBOOK, "matrix": {"vars": [{"rate": 0}, {"rate": 1}]},
            "attempts": 5, "concurrency": 4, **fields}  # fmt: skip


def wait_done(client: TestClient, path: str, headers: dict[str, str], timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        found = client.get(path, headers=headers).json()
        if found["status"] != "running":
            return found
        assert time.monotonic() < deadline, f"still running: {found['results']['total']}"
        time.sleep(0.2)


def test_an_experiment_runs_every_cell_and_its_figures_come_from_the_runs(client: TestClient) -> None:
    headers = collection(client, "exp-api")
    r = client.post("/api/v1/experiments/exp-api", json=definition(), headers=headers)
    assert r.status_code == 201, r.text
    created = r.json()
    assert (created["cells"], created["runs_total"], created["status"]) == (2, 10, "running")
    path = f"/api/v1/experiments/exp-api/{created['id']}"
    found = wait_done(client, path, headers)
    assert found["status"] == "completed"
    never, always = found["results"]["cells"]
    assert (never["attempts"], never["successes"], always["successes"]) == (5, 0, 5)
    assert always["pass_at_k"]["1"] == 1.0 and never["pass_at_k"]["5"] == 0.0
    (comparison,) = found["results"]["comparisons"]
    assert comparison["axis"] == "row" and comparison["difference"] == -1.0 and comparison["significant"]
    # every attempt is an ordinary run, labelled, listed like any other
    label = f"pier.experiment={created['id']}"
    runs = client.get(
        "/api/v1/db/trajectories/exp-api/rates", headers=headers, params={"label": label}
    ).json()
    assert runs["total"] == 10
    rows = list(csv.DictReader(io.StringIO(client.get(path + "/export", headers=headers).text)))
    assert len(rows) == 10 and {r["outcome"] for r in rows} == {"success", "failure"}
    assert sorted({(r["cell"], r["attempt"]) for r in rows}) == sorted(
        {(str(c), str(a)) for c in range(2) for a in range(5)}
    )
    lines = client.get(path + "/export", params={"format": "jsonl"}, headers=headers).text.splitlines()
    assert [json.loads(line)["trajectory_id"] for line in lines] == [r["trajectory_id"] for r in rows]
    atif = client.get(path + "/export", params={"format": "atif"}, headers=headers).text.splitlines()
    assert len(atif) == 10 and all(json.loads(line)["schema_version"] == "ATIF-v1.4" for line in atif)
    one_cell = client.get(path + "/runs", params={"cell": 1}, headers=headers).json()
    assert len(one_cell) == 5 and all(run["success"] for run in one_cell)


def test_a_bad_matrix_is_refused_naming_the_field_and_nothing_runs(client: TestClient) -> None:
    headers = collection(client, "exp-bad")
    bad = definition(matrix={"vars": [{"rate": 1}, {"speed": 2}]})
    r = client.post("/api/v1/experiments/exp-bad", json=bad, headers=headers)
    assert r.status_code == 422, r.text
    (error,) = r.json()["errors"]
    assert error["field"] == "matrix.vars[1]" and "it would start 10 run(s)" in error["message"]
    r = client.post("/api/v1/experiments/exp-bad", json=definition(matrix={"agents": [{"name": "nope"}]}),
                    headers=headers)  # fmt: skip
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "matrix.agents[0].name"
    assert client.get("/api/v1/experiments/exp-bad", headers=headers).json() == []
    assert client.get("/api/v1/db/trajectories/exp-bad/rates", headers=headers).json()["total"] == 0


def test_another_collections_token_cannot_reach_an_experiment(client: TestClient) -> None:
    mine, theirs = collection(client, "exp-mine"), collection(client, "exp-theirs")
    created = client.post("/api/v1/experiments/exp-mine", json=definition(attempts=1), headers=mine).json()
    for method, suffix in (("get", ""), ("post", "/cancel"), ("get", "/export"), ("get", "/runs")):
        r = getattr(client, method)(f"/api/v1/experiments/exp-mine/{created['id']}{suffix}", headers=theirs)
        assert r.status_code == 403, (suffix, r.text)
        r = getattr(client, method)(f"/api/v1/experiments/exp-theirs/{created['id']}{suffix}", headers=theirs)
        assert r.status_code == 404, (suffix, r.text)


def test_cancel_then_resume_finishes_with_each_attempt_once(client: TestClient) -> None:
    headers = collection(client, "exp-cancel")
    created = client.post("/api/v1/experiments/exp-cancel", json=definition(attempts=10, concurrency=2),
                          headers=headers).json()  # fmt: skip
    path = f"/api/v1/experiments/exp-cancel/{created['id']}"
    r = client.post(path + "/cancel", headers=headers)
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    assert client.post(path + "/cancel", headers=headers).status_code == 409
    r = client.post(path + "/resume", headers=headers)
    assert r.status_code == 200 and r.json()["status"] == "running"
    found = wait_done(client, path, headers)
    total = found["results"]["total"]
    assert found["status"] == "completed"
    assert total["attempts"] + total["cancelled"] == 20
    assert found["results"]["attempts_started"] == 20


def test_the_routes_are_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/api/v1/experiments/{collection}", "/api/v1/experiments/{collection}/{experiment_id}",
                 "/api/v1/experiments/{collection}/{experiment_id}/cancel",
                 "/api/v1/experiments/{collection}/{experiment_id}/resume",
                 "/api/v1/experiments/{collection}/{experiment_id}/export"):  # fmt: skip
        assert path in paths, path
