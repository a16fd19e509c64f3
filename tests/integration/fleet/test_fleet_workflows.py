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
    "step_configs": {"say": {"activity": "text_template", "template": "hello {{who}}", "who_path": "init_params.item"}},
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
