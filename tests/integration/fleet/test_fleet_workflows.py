"""A workflow on the fleet: accepted by a `pier serve` with PIER_EXECUTOR=temporal,
its steps run by a `pier worker` (all of them in the run's conclude activity),
its fan-out's children ordinary runs of the collection."""

from __future__ import annotations

import pytest
from tests.support.api_server import make_collection
from tests.support.fleet import FAKE_BACKEND, Fleet, ran_on

pytestmark = pytest.mark.integration

CHILD = {
    "init_params": {"item": ""},
    "step_configs": {
        "say": {"activity": "text_template", "template": "hello {{who}}", "who_path": "init_params.item"}
    },
    "steps": ["say"],
}
PARENT = {
    "init_params": {"text": "ada,bo,cy,di"},
    "step_configs": {
        "split": {"activity": "text_split", "text_path": "init_params.text", "chunk_size": 2, "overlap": 0},
        "names": {"activity": "text_echo", "text_path": "split.outputs.chunks[*]"},
        "fan": {"activity": "list_emit_await", "items": ["ada", "bo", "cy"], "child_workflow_name": "say",
                "max_concurrency": 2},
        "gather": {"activity": "extract_from_trajectories", "trajectory_list_path": "fan.outputs.trajectory_references",
                   "extract_keys": {"said": "say.outputs.text"}},
        "all": {"activity": "text_concatenate", "texts_path": "gather.outputs.said", "separator": "; "},
    },
    "steps": ["split", "names", "fan", "gather", "all"],
}  # fmt: skip


def test_a_workflow_with_a_fan_out_runs_on_a_worker(fleet: Fleet) -> None:
    fleet.settings.update({"PIER_SANDBOX_BACKEND": FAKE_BACKEND})
    server = fleet.server()
    collection = make_collection(server, "pier-fake:latest", prefix="fleetwf")
    fleet.worker("w1")
    with collection.client() as c:
        for name, wf in (("say", CHILD), ("parent", PARENT)):
            made = c.put(f"/api/v1/tasks/{collection.name}/{name}", json={"workflow": wf})
            assert made.status_code in (200, 201), made.text
    tid = collection.run("parent")
    record = collection.wait("parent", tid, timeout=120)
    assert record["status"] == "completed", (record["error"], fleet.workers[0].log_tail())
    assert record["steps"]["all"]["outputs"]["text"] == "hello ada; hello bo; hello cy"
    assert record["steps"]["names"]["outputs"]["text"] == ["ad", "a,", "bo", ",c", "y,", "di"]
    store = fleet.store()
    try:
        assert ran_on(store, tid) == ["w1"]
        for ref in record["steps"]["fan"]["outputs"]["trajectory_references"]:
            child = store.get_run(ref["trajectory_id"])
            assert child.status.value == "completed" and child.parent_trajectory_id == tid
    finally:
        store.close()


def test_a_worker_sigkilled_mid_fan_out_loses_no_finished_child_and_repeats_none(fleet: Fleet) -> None:
    import json
    import threading
    import time

    from tests.support.fleet import wait_for
    from tests.support.model_server import ModelServer, Recorded

    hold = threading.Event()  # set: the model answers at once

    def reply(item: Recorded) -> str:
        if not hold.is_set():
            time.sleep(1.5)
        return "said " + item.body["messages"][-1]["content"]

    model = ModelServer("127.0.0.1", reply=reply).start()
    try:
        # the operator's upstream for openai is the scripted model server
        fleet.settings.update({"PIER_SANDBOX_BACKEND": FAKE_BACKEND, "PIER_WORKER_SLOTS": "1",
                               "PIER_UPSTREAMS": json.dumps({"openai": model.url + "/v1"})})  # fmt: skip
        server = fleet.server()
        collection = make_collection(server, "pier-fake:latest", prefix="fleetwf")
        child = {"init_params": {"item": ""},
                 "step_configs": {"say": {"activity": "litellm_chat", "model": "gpt-4o-mini", "prompt_path": "init_params.item"}},
                 "steps": ["say"]}  # fmt: skip
        parent = {
            "init_params": {"items": [f"item {i}" for i in range(8)]},
            "step_configs": {
                "first": {"activity": "text_echo", "text": "before the fan-out"},
                "fan": {"activity": "list_emit_await", "items_path": "init_params.items", "child_workflow_name": "say",
                        "item_param_name": "item", "max_concurrency": 2},
                "gather": {"activity": "extract_from_trajectories",
                           "trajectory_list_path": "fan.outputs.trajectory_references",
                           "extract_keys": {"said": "say.outputs.text"}},
            },
            "steps": ["first", "fan", "gather"],
        }  # fmt: skip
        with collection.client() as c:
            env = {"OPENAI_API_KEY": "sk-fleet"}
            assert c.patch(f"/api/v1/collections/{collection.name}/environment",
                           json={"environment_variables": env}).status_code == 200  # fmt: skip
            for name, wf in (("say", child), ("parent", parent)):
                made = c.put(f"/api/v1/tasks/{collection.name}/{name}", json={"workflow": wf})
                assert made.status_code in (200, 201), made.text
        doomed = fleet.worker("doomed")
        tid = collection.run("parent")
        store = fleet.store()

        def finished_children() -> list | None:
            kids = store.list_runs(collection.name, "say", limit=100)[0]
            done = [r for r in kids if r.status.value == "completed"]
            return done if len(done) >= 3 else None

        before = wait_for(finished_children, 60, "three children completed")
        doomed.kill()  # mid-fan-out: two children are running on it
        hold.set()
        fleet.worker("spare")
        record = collection.wait("parent", tid, timeout=120)
        assert record["status"] == "completed", (record["error"], fleet.workers[-1].log_tail())
        said = record["steps"]["gather"]["outputs"]["said"]
        assert said == [f"said item {i}" for i in range(8)]  # the gather sees every result, in order
        refs = record["steps"]["fan"]["outputs"]["trajectory_references"]
        kept = {r.trajectory_id for r in before}
        assert kept <= {r["trajectory_id"] for r in refs}  # the children that had finished were kept
        kids = store.list_runs(collection.name, "say", limit=100)[0]
        completed = [r for r in kids if r.status.value == "completed"]
        per_item = sorted(r.init_params["item"] for r in completed)
        assert per_item == sorted(f"item {i}" for i in range(8))  # no item's child completed twice
        lost = [r for r in kids if r.status.value == "failed"]
        assert lost and all("was lost" in (r.error or "") for r in lost), [(r.status, r.error) for r in kids]
        assert all(r.status.terminal for r in kids)  # every child ended, once
        assert record["steps"]["first"]["status"] == "completed"
        lines = [e.line for e in store.events(tid)]
        assert "step first completed before: kept" in lines  # not run again on the spare
        assert ran_on(store, tid) == ["doomed", "spare"]
        store.close()
    finally:
        model.stop()
