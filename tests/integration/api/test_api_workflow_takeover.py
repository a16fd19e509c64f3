"""A `pier serve` SIGKILLed mid-fan-out: the server that starts next on the same
home and store takes the workflow run over from its record (docs/workflows.md,
"In-process and on the fleet"): its completed steps are kept, not run again;
the children that had ended are kept; those that were running died with the
server, end failed saying so, and their items get a new child."""

from __future__ import annotations

import time

import pytest
from tests.support.api_server import Collection, Server, make_collection

from pier.db import Store

pytestmark = pytest.mark.integration

ITEMS = [f"item-{i}" for i in range(6)]


@pytest.fixture
def server(tmp_path, docker_backend, base_image):
    settings = {"PIER_MAX_CONCURRENT_RUNS": "4", "PIER_SWEEP_INTERVAL_SEC": "1"}
    srv = Server(home=tmp_path / "home", db_url=f"sqlite:///{tmp_path / 'pier.db'}", settings=settings)
    srv.home.mkdir()
    yield srv.start()
    srv.stop()


def started_children(collection: Collection, tid: str) -> list[dict]:
    parent = collection.record("all", tid)
    refs = parent["steps"]["fan"]["outputs"].get("started") or []
    return [collection.record("nap", ref["trajectory_id"]) for ref in refs]


def test_a_killed_server_s_workflow_is_taken_over_from_its_record(server: Server, base_image, docker_backend):
    collection = make_collection(server, base_image, prefix="takeover")
    collection.put_task("nap", "sleep 3; echo {{item}} > {{results_dir}}/out.txt")
    workflow = {
        "init_params": {"items": ITEMS},
        "step_configs": {
            "first": {"activity": "text_echo", "text": "before the fan-out"},
            "fan": {"activity": "list_emit_await", "items_path": "init_params.items",
                    "child_workflow_name": "nap", "item_param_name": "item", "max_concurrency": 2},
            "gather": {"activity": "extract_from_trajectories",
                       "trajectory_list_path": "fan.outputs.trajectory_references",
                       "extract_keys": {"said": "run.inputs.vars.item", "ok": "run.outputs.success"}},
        },
        "steps": ["first", "fan", "gather"],
    }  # fmt: skip
    with collection.client() as c:
        made = c.put(f"/api/v1/tasks/{collection.name}/all", json={"workflow": workflow})
        assert made.status_code in (200, 201), made.text
    tid = collection.run("all")

    deadline = time.monotonic() + 180
    while True:  # some children ended, some running: kill the server then
        kids = started_children(collection, tid)
        done = [k for k in kids if k["status"] == "completed"]
        running = [k for k in kids if k["status"] == "running"]
        if len(done) >= 2 and running:
            break
        assert time.monotonic() < deadline, [k["status"] for k in kids]
        time.sleep(0.2)
    server.kill()
    store = Store.open(server.db_url)
    try:
        at_kill = {
            r.trajectory_id: r.status.value for r in store.list_runs(collection.name, "nap", limit=100)[0]
        }
        first_ended = store.get_run(tid).steps["first"].ended
        server.start()

        record = collection.wait("all", tid, timeout=240)
        assert record["status"] == "completed", (record["error"], server.log_tail())
        lines = [e.line for e in store.events(tid)]
        assert "step first completed before: kept" in lines, lines  # not run again
        assert store.get_run(tid).steps["first"].ended == first_ended

        gathered = record["steps"]["gather"]["outputs"]
        assert gathered["said"] == ITEMS and gathered["ok"] == [True] * len(ITEMS)
        refs = record["steps"]["fan"]["outputs"]["trajectory_references"]
        kept = {t for t, status in at_kill.items() if status == "completed"}
        assert kept <= {r["trajectory_id"] for r in refs}  # the children that had ended were kept

        kids = store.list_runs(collection.name, "nap", limit=100)[0]
        assert all(k.parent_trajectory_id == tid for k in kids)
        completed = sorted(k.init_params["vars"]["item"] for k in kids if k.status.value == "completed")
        assert completed == ITEMS  # every item has exactly one child that completed
        assert all(k.status.value in ("completed", "failed") for k in kids), [
            (k.status, k.error) for k in kids
        ]
        lost = {k.trajectory_id: k for k in kids if k.status.value == "failed"}
        was_running = {t for t, status in at_kill.items() if status in ("running", "pending")}
        assert set(lost) == was_running and lost, (at_kill, [(k.status, k.error) for k in kids])
        for child in lost.values():  # each lost child's item was given a new one
            assert "was lost; the fan-out started this item again" in (child.error or ""), child.error
            ref = refs[ITEMS.index(child.init_params["vars"]["item"])]
            assert ref["status"] == "completed" and ref["trajectory_id"] != child.trajectory_id

        deadline = time.monotonic() + 60  # the lost children's sandboxes are swept
        while collection.sandboxes(docker_backend):
            assert time.monotonic() < deadline, collection.sandboxes(docker_backend)
            time.sleep(0.5)
    finally:
        store.close()
