"""list_emit_await and extract_from_trajectories: children are ordinary runs
of the collection linked to their parent, at most max_concurrency at once,
and the gather reads each child's outputs by path. A fan-out's children count
as the collection's runs: its concurrent_runs quota bounds them together with
its other runs (the scripted model server counts the calls in flight at
once), and the parent's model budget caps what its children spend (the
server counts the calls that reached it)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.model_server import ModelServer, Recorded
from tests.unit.workflows.test_model_steps import _api

CHILD = {
    "init_params": {"chunk": "", "model": "gpt-4o-mini"},
    "step_configs": {
        "summarize": {"activity": "litellm_chat", "model_path": "init_params.model",
                      "system_prompt": "Summarize.", "prompt_path": "init_params.chunk"},
    },
    "steps": ["summarize"],
}  # fmt: skip
# The platform's fan-out template (workflow-templates.md, "Fan-Out Processing").
FAN_OUT = {
    "init_params": {"text": "abcdefghijklmnopqrstuvwxyz", "chunk_size": 10},
    "step_configs": {
        "split": {"activity": "text_split", "text_path": "init_params.text",
                  "chunk_size_path": "init_params.chunk_size", "overlap": 2},
        "process_chunks": {"activity": "list_emit_await", "items_path": "split.outputs.chunks",
                           "child_workflow_name": "process-chunk", "item_param_name": "chunk",
                           "max_concurrency": 10},
        "gather": {"activity": "extract_from_trajectories",
                   "trajectory_list_path": "process_chunks.outputs.trajectory_references",
                   "extract_keys": {"summary": "summarize.outputs.text"}},
    },
    "steps": ["split", "process_chunks", "gather"],
}  # fmt: skip


class Counter:
    def __init__(self, hold: float):
        self.hold, self.now, self.most, self.seen = hold, 0, 0, 0
        self.lock = threading.Lock()

    def __call__(self, item: Recorded) -> str:
        with self.lock:
            self.now += 1
            self.seen += 1
            self.most = max(self.most, self.now)
        time.sleep(self.hold)
        with self.lock:
            self.now -= 1
        return "summary of " + item.body["messages"][-1]["content"]


@pytest.fixture
def counter() -> Counter:
    return Counter(0.0)


@pytest.fixture
def model_server(counter: Counter) -> Iterator[ModelServer]:
    server = ModelServer("127.0.0.1", reply=counter).start()
    yield server
    server.stop()


@pytest.fixture
def api(tmp_path: Path, model_server: ModelServer):
    # more run slots than any fan-out here runs at once: children take the server's slots too
    yield from _api(tmp_path, model_server, max_concurrent_runs=8)


def test_the_fan_out_template_splits_fans_out_and_gathers(api):
    assert api.task("process-chunk", CHILD).status_code in (200, 201)
    assert api.task("fan", FAN_OUT).status_code in (200, 201)
    run = api.run("fan")
    assert run["status"] == "completed", run["error"]
    chunks = run["steps"]["split"]["outputs"]["chunks"]
    assert chunks == ["abcdefghij", "ijklmnopqr", "qrstuvwxyz"]
    refs = run["steps"]["process_chunks"]["outputs"]["trajectory_references"]
    assert [r["index"] for r in refs] == [0, 1, 2] and {r["name"] for r in refs} == {"process-chunk"}
    gathered = run["steps"]["gather"]["outputs"]
    assert gathered["summary"] == [f"summary of {c}" for c in chunks]
    assert [row["trajectory_id"] for row in gathered["extracted_data"]] == [r["trajectory_id"] for r in refs]
    for ref in refs:  # each child an ordinary run of the collection, linked to its parent
        child = api.c.get(f"/api/v1/db/trajectory/team/process-chunk/{ref['trajectory_id']}").json()
        assert child["status"] == "completed" and child["parent_trajectory_id"] == run["trajectory_id"]
        assert child["parent_step"] == "process_chunks" and child["init_params"]["chunk"] in chunks
    listed = api.c.get("/api/v1/db/trajectories/team/process-chunk").json()["trajectories"]
    assert {t["trajectory_id"] for t in listed} == {r["trajectory_id"] for r in refs}


def test_twenty_children_with_max_concurrency_4_never_run_more_than_4_at_once(api, counter):
    counter.hold = 0.3
    wf = {
        "init_params": {"items": [f"item {i}" for i in range(20)]},
        "step_configs": {
            "fan": {"activity": "list_emit_await", "items_path": "init_params.items",
                    "child_workflow_name": "process-chunk", "item_param_name": "chunk", "max_concurrency": 4},
            "gather": {"activity": "extract_from_trajectories",
                       "trajectory_list_path": "fan.outputs.trajectory_references",
                       "extract_keys": {"summary": "summarize.outputs.text"}},
        },
        "steps": ["fan", "gather"],
    }  # fmt: skip
    assert api.task("process-chunk", CHILD).status_code in (200, 201)
    assert api.task("fan20", wf).status_code in (200, 201)
    run = api.run("fan20", timeout=120)
    assert run["status"] == "completed", run["error"]
    assert counter.seen == 20
    assert counter.most == 4  # never more, and the pool was used in full
    assert sorted(run["steps"]["gather"]["outputs"]["summary"]) == sorted(
        f"summary of item {i}" for i in range(20)
    )


def test_a_failed_child_fails_the_fan_out_unless_continue_on_error(api):
    bad_child = {
        "init_params": {"chunk": ""},
        "step_configs": {"summarize": {"activity": "text_echo", "text_path": "init_params.chunk.missing"}},
        "steps": ["summarize"],
    }
    assert api.task("broken", bad_child).status_code in (200, 201)
    wf = {
        "init_params": {"items": ["a", "b"]},
        "step_configs": {"fan": {"activity": "list_emit_await", "items_path": "init_params.items",
                                 "child_workflow_name": "broken", "item_param_name": "chunk"}},
        "steps": ["fan"],
    }  # fmt: skip
    assert api.task("fan-broken", wf).status_code in (200, 201)
    run = api.run("fan-broken")
    assert run["status"] == "failed" and run["failed_stage"] == "fan"
    assert "2 of 2 children of broken failed" in run["error"]
    wf["step_configs"]["fan"]["continue_on_error"] = True
    assert api.task("fan-broken", wf).status_code in (200, 201)
    run = api.run("fan-broken")
    assert run["status"] == "completed" and run["steps"]["fan"]["outputs"]["failed"] == 2


def test_a_fan_out_to_a_task_that_does_not_exist_fails_naming_it(api):
    wf = {
        "init_params": {"items": ["a"]},
        "step_configs": {"fan": {"activity": "list_emit_await", "items_path": "init_params.items",
                                 "child_workflow_name": "nowhere"}},
        "steps": ["fan"],
    }  # fmt: skip
    assert api.task("fan-nowhere", wf).status_code in (200, 201)
    run = api.run("fan-nowhere")
    assert run["status"] == "failed" and "nowhere" in run["error"]


def test_cancelling_the_parent_cancels_its_running_children_and_starts_no_more(api, counter):

    counter.hold = 1.0
    wf = {
        "init_params": {"items": [f"item {i}" for i in range(6)]},
        "step_configs": {"fan": {"activity": "list_emit_await", "items_path": "init_params.items",
                                 "child_workflow_name": "process-chunk", "item_param_name": "chunk",
                                 "max_concurrency": 2}},
        "steps": ["fan"],
    }  # fmt: skip
    assert api.task("process-chunk", CHILD).status_code in (200, 201)
    assert api.task("fan-cancel", wf).status_code in (200, 201)
    sent = api.c.post("/api/v1/run/team/fan-cancel", data={"init_params": json.dumps({})})
    tid = sent.json()["trajectory_id"]
    deadline = time.monotonic() + 30
    while counter.seen < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert counter.seen == 2, "two children are asking the model"
    cancelled = api.c.post("/api/v1/trajectory/team/fan-cancel/statuses", json={tid: "cancelled"})
    assert cancelled.status_code == 200, cancelled.text
    run = api.wait("fan-cancel", tid)
    assert run["status"] == "cancelled", run
    children = api.c.get("/api/v1/db/trajectories/team/process-chunk").json()["trajectories"]
    assert len(children) == 2 and counter.seen == 2  # no child started after the cancel
    for child in children:
        ended = api.wait("process-chunk", child["trajectory_id"])
        assert ended["status"] == "cancelled", ended


def _fan(items: int, concurrency: int, **extra) -> dict:
    return {
        "init_params": {"items": [f"item {i}" for i in range(items)], **extra},
        "step_configs": {"fan": {"activity": "list_emit_await", "items_path": "init_params.items",
                                 "child_workflow_name": "process-chunk", "item_param_name": "chunk",
                                 "max_concurrency": concurrency, "continue_on_error": True}},
        "steps": ["fan"],
    }  # fmt: skip


def _quota(api, concurrent: int) -> None:
    put = api.c.put("/api/v1/collections/team/quotas", json={"concurrent_runs": concurrent})
    assert put.status_code == 200, put.text


@pytest.mark.parametrize("quota", [1, 2])
def test_a_fan_out_of_3k_children_never_runs_more_than_the_collections_quota_of_k(api, counter, quota):
    counter.hold = 0.25
    _quota(api, quota)
    assert api.task("process-chunk", CHILD).status_code in (200, 201)
    assert api.task("fan", _fan(3 * quota, 3 * quota)).status_code in (200, 201)
    # a second top-level run of the collection, sent with it, shares the quota
    other = api.c.post("/api/v1/run/team/process-chunk", data={"init_params": json.dumps({"chunk": "alone"})})
    assert other.status_code in (200, 201, 202), other.text
    run = api.run("fan", timeout=120)
    assert run["status"] == "completed", run["error"]
    assert run["steps"]["fan"]["outputs"]["completed"] == 3 * quota
    assert api.wait("process-chunk", other.json()["trajectory_id"])["status"] == "completed"
    assert counter.seen == 3 * quota + 1
    assert counter.most == quota  # never more than the quota at once, and the quota used in full


def test_a_childs_log_says_it_waits_for_a_slot_of_the_quota(api, counter):
    counter.hold = 0.2
    _quota(api, 1)
    assert api.task("process-chunk", CHILD).status_code in (200, 201)
    assert api.task("fan", _fan(3, 3)).status_code in (200, 201)
    run = api.run("fan", timeout=60)
    assert run["status"] == "completed", run["error"]
    refs = run["steps"]["fan"]["outputs"]["trajectory_references"]
    said = []
    for ref in refs:
        events = api.c.get(f"/api/v1/workflows-logs/{ref['workflow_id']}").json()
        said += [json.dumps(e) for e in events["logs"]]
    assert any("waiting for a run slot" in m and "concurrent_runs quota (1)" in m for m in said), said


def test_the_parents_model_budget_caps_its_childrens_calls(api, counter, model_server):
    counter.hold = 0.1
    assert api.task("process-chunk", CHILD).status_code in (200, 201)
    assert api.task("fan", _fan(6, 3, model_budget={"requests": 4})).status_code in (200, 201)
    run = api.run("fan", timeout=60)
    assert len(model_server.model_calls()) == 4  # the six children together made four calls, no more
    fan = run["steps"]["fan"]["outputs"]
    assert fan["completed"] == 4 and fan["failed"] == 2
    assert all("budget" in e["error"] for e in fan["errors"]), fan["errors"]
    assert run["usage"]["requests"] == 4  # the children's spend is the parent's


RUNBOOK_CHILD = """---
agent: script
image: pier-fake:latest
snapshot: ""
---
# echo the item

```bash
echo {{item}} pier-fake-success-rate=1
```
"""


def test_a_runbook_child_gets_what_is_left_of_its_parents_model_budget(tmp_path, model_server):
    from fastapi.testclient import TestClient

    from pier.api.app import create_app
    from tests.unit.workflows.conftest import ADMIN, Api, make_settings

    port = model_server.url.rsplit(":", 1)[1]
    settings = make_settings(
        tmp_path, sandbox_backend="fake-rated", collection_upstreams={"team": [f"127.0.0.1:{port}"]}
    )
    with TestClient(create_app(settings), headers={"Authorization": f"Bearer {ADMIN}"}) as c:
        assert c.post("/api/v1/collections", json={"name": "team"}).status_code in (200, 201)
        env = {"OPENAI_API_KEY": "sk-" + "o" * 30, "OPENAI_BASE_URL": model_server.url + "/v1"}
        assert (
            c.patch("/api/v1/collections/team/environment", json={"environment_variables": env}).status_code
            == 200
        )
        api = Api(c)
        put = c.put("/api/v1/tasks/team/rb", json={"workflow": RUNBOOK_CHILD})
        assert put.status_code in (200, 201), put.text
        wf = {
            "init_params": {"prompt": "hi", "model_budget": {"requests": 5}},
            "step_configs": {
                "chat": {"activity": "litellm_chat", "model": "gpt-4o-mini", "prompt_path": "init_params.prompt"},
                "fan": {"activity": "list_emit_await", "items": ["a"], "child_workflow_name": "rb"},
            },
            "steps": ["chat", "fan"],
        }  # fmt: skip
        assert api.task("parent", wf).status_code in (200, 201)
        run = api.run("parent", timeout=60)
        assert run["status"] == "completed", run["error"]
        (ref,) = run["steps"]["fan"]["outputs"]["trajectory_references"]
        child = c.get(f"/api/v1/db/trajectory/team/rb/{ref['trajectory_id']}").json()
        assert child["init_params"]["model_budget"] == {"requests": 4}  # the chat step spent one of five
