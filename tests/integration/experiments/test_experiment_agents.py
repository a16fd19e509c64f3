"""An experiment of real agent CLIs on Docker, through a real `pier serve`:
claude-code and codex, two models each, two vars rows, three attempts (24
runs), every model call answered by the scripted model server. Every run
completes and passes its check, each cell's pass@1 is 1, each run's cost is
the gateway's (non-zero, priced by model) and each cell's cost is the sum of
its runs', and the ATIF export holds a schema-valid trajectory with agent
steps for a run of each agent."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import pytest
from tests.support.api_server import ADMIN_TOKEN, Server

from pier.agents.atif import Trajectory as AtifTrajectory

pytestmark = pytest.mark.integration

AGENTS = [
    {"name": "claude-code", "models": ["claude-sonnet-4-5", "claude-haiku-4-5"]},
    {"name": "codex", "models": ["gpt-5", "gpt-5-mini"]},
]
ROWS = [{"a": "six", "b": "seven"}, {"a": "seven", "b": "six"}]
ATTEMPTS = 3
RUNS = 2 * 2 * len(ROWS) * ATTEMPTS
SCHEMA = AtifTrajectory.model_json_schema()


def runbook_text(image: str) -> str:
    front = {"agent": "claude-code", "model": "claude-sonnet-4-5", "snapshot": "", "image": image,
             "primary_outputs": ["answer.md"],
             "checks": [{"name": "answer", "type": "file_exists", "path": "answer.md"}]}  # fmt: skip
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    question = "What is {{a}} times {{b}}? Write the answer to {{results_dir}}/answer.md."
    return "---\n" + "\n".join(lines) + f"\n---\n# Answer\n\n{question}\n"


@pytest.fixture
def server(tmp_path: Path, model_server) -> Iterator[Server]:
    home = tmp_path / "home"
    home.mkdir()
    # The operator's upstreams: the collection's endpoint variables must name these.
    upstreams = {"anthropic": model_server.url, "openai": model_server.url + "/v1"}
    settings = {"PIER_MAX_CONCURRENT_RUNS": "4", "PIER_EXPERIMENT_POLL_SEC": "0.5",
                "PIER_UPSTREAMS": json.dumps(upstreams)}  # fmt: skip
    srv = Server(home=home, db_url=f"sqlite:///{tmp_path / 'pier.db'}", settings=settings).start()
    yield srv
    srv.stop()


def collection_pointed_at(server: Server, model_server) -> httpx.Client:
    """A collection whose provider keys and base URLs send every model call to
    the scripted server (through pier's gateway, which counts and prices them)."""
    with server.client(ADMIN_TOKEN) as admin:
        token = admin.post("/api/v1/collections", json={"name": "agents"}).json()["token"]
    client = server.client(token)
    env = {"ANTHROPIC_API_KEY": "sk-pier-test-anthropic", "ANTHROPIC_BASE_URL": model_server.url,
           "OPENAI_API_KEY": "sk-pier-test-openai", "OPENAI_BASE_URL": model_server.url + "/v1"}  # fmt: skip
    r = client.patch("/api/v1/collections/agents/environment", json={"environment_variables": env})
    assert r.status_code == 200, r.text
    return client


def wait_ended(client: httpx.Client, experiment_id: str, timeout: float = 1500) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        r = client.get(f"/api/v1/experiments/agents/{experiment_id}")
        assert r.status_code == 200, r.text
        found = r.json()
        if found["status"] != "running":
            return found
        assert time.monotonic() < deadline, f"experiment still at {found['results']['total']}"
        time.sleep(2)


def test_two_real_agents_two_models_each_two_rows_three_attempts(server, agent_image, model_server) -> None:
    client = collection_pointed_at(server, model_server)
    body = {"name": "agents", "runbook": runbook_text(agent_image),
            "matrix": {"agents": AGENTS, "vars": ROWS}, "attempts": ATTEMPTS, "concurrency": 4,
            "infra_retries": 0}  # fmt: skip
    r = client.post("/api/v1/experiments/agents", json=body)
    assert r.status_code == 201, r.text
    experiment_id = r.json()["id"]
    began = time.monotonic()

    found = wait_ended(client, experiment_id)
    print(f"{RUNS} real-agent runs in {time.monotonic() - began:.0f} s")
    assert found["status"] == "completed", found

    runs = client.get(f"/api/v1/experiments/agents/{experiment_id}/runs").json()
    assert len(runs) == RUNS
    failed = [(r["cell_key"], r["failed_stage"], r["error"]) for r in runs if not r["success"]]
    assert not failed, failed
    assert {r["status"] for r in runs} == {"completed"}

    # every model call went to the scripted server, with the key and model of its cell
    assert {r.credential for r in model_server.requests} == {"sk-pier-test-anthropic", "sk-pier-test-openai"}
    assert {c.model for c in model_server.model_calls()} >= {m for a in AGENTS for m in a["models"]}

    results = found["results"]
    assert results["total"]["attempts"] == RUNS and results["total"]["successes"] == RUNS
    assert len(results["cells"]) == 8
    by_cell: dict[str, list[dict]] = {}
    for row in runs:
        record = client.get(f"/api/v1/db/trajectory/agents/agents/{row['trajectory_id']}").json()
        gateway = record["steps"]["run"]["outputs"]["usage"]["gateway"]
        # the run's cost is the gateway's count, priced by the cell's model
        assert gateway["cost_usd"] > 0 and row["cost_usd"] == pytest.approx(gateway["cost_usd"]), row
        assert row["tokens"] > 0
        by_cell.setdefault(row["cell_key"], []).append({"cost": gateway["cost_usd"], "tokens": row["tokens"]})
    for cell in results["cells"]:
        assert cell["attempts"] == ATTEMPTS and cell["successes"] == ATTEMPTS, cell["key"]
        assert cell["pass_at_k"]["1"] == 1 and cell["pass_hat_k"][str(ATTEMPTS)] == 1
        mine = by_cell[cell["key"]]
        assert cell["cost_usd"] == pytest.approx(sum(m["cost"] for m in mine), abs=1e-6)
        assert cell["cost_usd"] > 0 and cell["tokens"] == sum(m["tokens"] for m in mine) > 0
    # the models are priced apart: a cell's cost names its model
    sonnet, haiku = (
        next(c for c in results["cells"] if c["key"] == f"claude-code/{m}/row0")["cost_usd"]
        for m in ("claude-sonnet-4-5", "claude-haiku-4-5")
    )
    assert sonnet > haiku

    r = client.get(f"/api/v1/experiments/agents/{experiment_id}/export", params={"format": "atif"})
    assert r.status_code == 200, r.text
    trajectories = [json.loads(line) for line in r.text.splitlines()]
    assert len(trajectories) == RUNS
    for agent in ("claude-code", "codex"):
        one = next(t for t in trajectories if t["agent"]["name"] == agent)
        jsonschema.validate(one, SCHEMA)
        AtifTrajectory.model_validate(one)
        assert any(step["source"] == "agent" for step in one["steps"]), one
