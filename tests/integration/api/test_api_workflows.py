"""Workflows on a real `pier serve` and the Docker engine: a runbook task
fanned out over a list (each child a script-agent runbook run in its own
sandbox) and its results gathered (fan-in)."""

from __future__ import annotations

import itertools

import pytest
from tests.support.api_server import Collection

pytestmark = pytest.mark.integration


def test_a_runbook_fanned_out_over_a_list_and_gathered(collection: Collection, docker_backend):
    collection.put_task("shout", 'echo "{{item}}!" | tr a-z A-Z | tee {{results_dir}}/out.txt')
    workflow = {
        "init_params": {"items": ["ada", "bo", "cy"]},
        "step_configs": {
            "fan": {"activity": "list_emit_await", "items_path": "init_params.items",
                    "child_workflow_name": "shout", "item_param_name": "item", "max_concurrency": 2},
            "gather": {"activity": "extract_from_trajectories",
                       "trajectory_list_path": "fan.outputs.trajectory_references",
                       "extract_keys": {"ok": "run.outputs.success", "file": "run.outputs.results_files[0].path",
                                        "said": "run.inputs.vars.item"}},
        },
        "steps": ["fan", "gather"],
    }  # fmt: skip
    with collection.client() as c:
        made = c.put(f"/api/v1/tasks/{collection.name}/shout-all", json={"workflow": workflow})
        assert made.status_code in (200, 201), made.text
    tid = collection.run("shout-all")
    record = collection.wait("shout-all", tid, timeout=300)
    assert record["status"] == "completed", record["error"]
    gathered = record["steps"]["gather"]["outputs"]
    assert gathered["ok"] == [True, True, True]
    assert gathered["file"] == ["out.txt"] * 3 and gathered["said"] == ["ada", "bo", "cy"]
    for ref in record["steps"]["fan"]["outputs"]["trajectory_references"]:
        child = collection.record("shout", ref["trajectory_id"])
        assert child["parent_trajectory_id"] == tid and child["steps"]["run"]["outputs"]["success"] is True
        with collection.client() as c:
            key = child["steps"]["run"]["outputs"]["files"][0]
            body = c.get(f"/api/v1/file/{key}").text
        assert body.strip() == child["steps"]["run"]["inputs"]["vars"]["item"].upper() + "!"
    assert collection.sandboxes(docker_backend) == []  # every child's sandbox is gone


def test_runbook_children_hold_no_more_sandboxes_than_the_collections_quota(collection: Collection, server):
    from tests.support.api_server import ADMIN_TOKEN

    with server.client(ADMIN_TOKEN) as admin:
        set_quota = admin.put(f"/api/v1/collections/{collection.name}/quotas", json={"concurrent_runs": 1})
        assert set_quota.status_code == 200, set_quota.text
    collection.put_task("nap", "sleep 1; echo {{item}} > {{results_dir}}/out.txt")
    workflow = {
        "init_params": {"items": ["a", "b", "c"]},
        "step_configs": {"fan": {"activity": "list_emit_await", "items_path": "init_params.items",
                                 "child_workflow_name": "nap", "max_concurrency": 3}},
        "steps": ["fan"],
    }  # fmt: skip
    with collection.client() as c:
        assert c.put(f"/api/v1/tasks/{collection.name}/naps", json={"workflow": workflow}).status_code in (
            200,
            201,
        )
    tid = collection.run("naps")
    record = collection.wait("naps", tid, timeout=300)
    assert record["status"] == "completed", record["error"]
    spans = []
    for ref in record["steps"]["fan"]["outputs"]["trajectory_references"]:
        stages = collection.record("nap", ref["trajectory_id"])["steps"]["run"]["outputs"]["stages"]
        create = next(s for s in stages if s["name"] == "create")
        save = next(s for s in stages if s["name"] == "save")
        spans.append((create["started"], save["ended"]))
    spans.sort()
    # one at a time: each child's sandbox was made after the one before had gone
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans)), spans
