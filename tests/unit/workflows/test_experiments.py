"""An experiment whose unit is a workflow task: attempts x inputs (matrix.vars
rows become the runs' init_params, which the workflow's paths read), each
attempt passing or failing by the workflow's outcome, its cost and tokens
those its model steps' gateway counted (against the scripted model server)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.model_server import ModelServer
from tests.unit.workflows.test_model_steps import _api

WORKFLOW = {
    "init_params": {"prompt": "hi", "data": {}},
    "step_configs": {
        "chat": {"activity": "litellm_chat", "model": "gpt-4o-mini", "prompt_path": "init_params.prompt"},
        "pre": {"activity": "text_echo", "text_path": "init_params.data"},
        # a row whose data has no answer fails here, naming the step
        "pick": {"activity": "text_echo", "text_path": "pre.outputs.text.answer"},
    },
    "steps": ["chat", "pre", "pick"],
}  # fmt: skip


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = ModelServer("127.0.0.1", reply=lambda _item: "an answer").start()
    yield server
    server.stop()


@pytest.fixture
def api(tmp_path: Path, model_server: ModelServer):
    yield from _api(tmp_path, model_server, max_concurrent_runs=4, experiment_poll_sec=0.1)


def test_an_experiment_runs_a_workflow_task_attempts_times_per_input(api, model_server):
    assert api.task("answer", WORKFLOW).status_code in (200, 201)
    spec = {"name": "answers", "task": "answer", "attempts": 3, "concurrency": 3,
            "matrix": {"vars": [{"data": {"answer": 42}, "prompt": "one"}, {"data": {}, "prompt": "two"}]}}  # fmt: skip
    created = api.c.post("/api/v1/experiments/team", json=spec)
    assert created.status_code == 201, created.text
    assert (created.json()["cells"], created.json()["runs_total"]) == (2, 6)
    path = f"/api/v1/experiments/team/{created.json()['id']}"
    deadline = time.monotonic() + 120
    while (found := api.c.get(path).json())["status"] == "running":
        assert time.monotonic() < deadline, found["results"]["total"]
        time.sleep(0.2)
    assert found["status"] == "completed", found
    good, bad = found["results"]["cells"]
    assert (good["attempts"], good["successes"]) == (3, 3)
    assert (bad["attempts"], bad["successes"]) == (3, 0)
    assert good["tokens"] > 0 and good["cost_usd"] > 0  # the chat steps' usage, from the gateway
    assert len(model_server.model_calls()) == 6
    assert {c.body["messages"][-1]["content"] for c in model_server.model_calls()} == {"one", "two"}
    runs = api.c.get(path + "/runs", params={"cell": 1}).json()
    assert len(runs) == 3 and not any(r["success"] for r in runs)
    one = api.c.get(f"/api/v1/db/trajectory/team/answer/{runs[0]['trajectory_id']}").json()
    assert one["failed_stage"] == "pick" and "pre.outputs.text.answer" in one["error"]
