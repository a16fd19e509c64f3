"""The platform's routes that need no sandbox: trailing slashes, collections and
tasks as the platform's client calls them, labels, stats, ingest, step
templates, workflow logs, trial keys on a server without them."""

from __future__ import annotations

import pytest
from tests.support.api_server import Collection

pytestmark = pytest.mark.integration

JETTY_WORKFLOW = {
    "init_params": {"prompt": "hi"},
    "steps": ["fetch", "run"],
    "step_configs": {
        "fetch": {"activity": "http_get", "url": "https://example.org"},
        "run": {"activity": "runbook"},
    },
}


def _ingest(c, collection: str, task: str, tid: str, **body) -> dict:
    r = c.post(f"/api/v1/trajectories/{collection}/{task}/ingest", json={"trajectory_id": tid, **body})
    assert r.status_code == 200, r.text
    return r.json()


def test_every_route_answers_with_and_without_a_trailing_slash(collection: Collection):
    c = collection.client()
    name = collection.name
    collection.put_task("t", "echo hi > {{results_dir}}/x")
    _ingest(c, name, "t", "slash-1")
    for path in [
        "/api/v1/collections",
        f"/api/v1/collections/{name}",
        f"/api/v1/collections/{name}/environment",
        f"/api/v1/tasks/{name}",
        f"/api/v1/tasks/{name}/t",
        f"/api/v1/db/trajectories/{name}/t",
        f"/api/v1/db/trajectory/{name}/t/slash-1",
        f"/api/v1/db/stats/{name}/t",
        f"/api/v1/workflows-logs/{name}-t--slash-1",
        "/api/v1/step-templates",
        "/api/v1/step-templates/runbook",
        f"/api/v1/trial/{name}",
        "/api/v1/health",
    ]:
        for form in (path, path + "/"):
            r = c.get(form, follow_redirects=False)
            assert r.status_code == 200, (form, r.status_code, r.text)
    made = c.post(f"/api/v1/tasks/{name}/", json={"name": "posted", "workflow": {"init_params": {}}})
    assert made.status_code in (201, 422), made.text  # answered, not redirected
    label = c.post(f"/api/v1/trajectory/{name}/t/slash-1/labels/", json={"key": "k", "value": "v"})
    assert label.status_code == 200, label.text


def test_a_workflow_with_an_activity_pier_has_not_got_is_refused(collection: Collection):
    c = collection.client()
    base = f"/api/v1/tasks/{collection.name}"
    for r in (
        c.post(base, json={"name": "jetty", "workflow": JETTY_WORKFLOW}),
        c.put(f"{base}/jetty", json=JETTY_WORKFLOW),
        c.put(f"{base}/jetty", json={"workflow": JETTY_WORKFLOW}),
    ):
        assert r.status_code == 422, r.text
        (error,) = r.json()["errors"]
        assert error["field"].endswith("step_configs.fetch.activity"), error
        assert "'http_get'" in error["message"] and "runbook" in error["message"]
    assert c.get(f"{base}/jetty").status_code == 404


def test_task_create_update_delete_and_the_runs_stay(collection: Collection, base_image):
    c = collection.client()
    base = f"/api/v1/tasks/{collection.name}"
    # A task is stored only when a run of it could start: the script agent needs a bash block.
    workflow = {
        "init_params": {
            "instruction": "---\nagent: script\n---\n# t\n\n```bash\ntrue\n```\n",
            "image": base_image,
        }
    }
    made = c.post(base, json={"name": "crud", "description": "first", "workflow": workflow})
    assert made.status_code == 201, made.text
    assert made.json()["description"] == "first" and made.json()["workflow"]["steps"] == ["run"]
    assert c.post(base, json={"name": "crud", "workflow": workflow}).status_code == 409
    updated = c.put(f"{base}/crud", json={"description": "second"})
    assert updated.status_code == 200 and updated.json()["description"] == "second"
    assert updated.json()["workflow"]["init_params"]["image"] == base_image
    _ingest(c, collection.name, "crud", "crud-run")
    deleted = c.delete(f"{base}/crud")
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True
    assert c.get(f"{base}/crud").status_code == 404
    assert c.delete(f"{base}/crud").status_code == 404
    kept = c.get(f"/api/v1/db/trajectory/{collection.name}/crud/crud-run")
    assert kept.status_code == 200 and kept.json()["trajectory_id"] == "crud-run"


def test_labels_ingest_stats_and_filters(collection: Collection):
    c = collection.client()
    name = collection.name
    first = _ingest(c, name, "evals", "e1", status="completed", scores={"acc": 1}, cost_usd=0.5,
                    labels={"suite": "a"}, output={"answer": 4})  # fmt: skip
    assert {(lb["key"], lb["value"]) for lb in first["labels"]} == {
        ("score.acc", "1.0"),
        ("suite", "a"),
        ("cost_est_usd", "0.5"),
    }
    _ingest(c, name, "evals", "e2", status="failed", labels={"suite": "b"}, cost_usd=0.25)
    again = _ingest(c, name, "evals", "e1", status="completed", scores={"acc": 0})
    assert [lb["key"] for lb in again["labels"]] == ["score.acc"], "a re-push replaces in place"
    bad = c.post(f"/api/v1/trajectories/{name}/evals/ingest", json={"status": "exploded"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "status"
    record = c.get(f"/api/v1/db/trajectory/{name}/evals/e1").json()
    assert (
        record["steps"]["run"]["outputs"]["output"] is None and record["steps"]["run"]["activity"] == "ingest"
    )

    added = c.post(f"/api/v1/trajectory/{name}/evals/e2/labels", json={"key": "reviewed", "value": "yes"})
    assert added.status_code == 200 and added.json()["label"]["author"] == name
    for body in ({"value": "x"}, {"key": "", "value": "x"}, {"key": "  ", "value": "x"}):
        r = c.post(f"/api/v1/trajectory/{name}/evals/e2/labels", json=body)
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "key", (body, r.text)
    listed = c.get(f"/api/v1/db/trajectories/{name}/evals", params={"label": "reviewed=yes"}).json()
    assert [t["trajectory_id"] for t in listed["trajectories"]] == ["e2"] and listed["total"] == 1
    assert listed["trajectories"][0]["labels"][-1]["key"] == "reviewed"
    both = c.get(f"/api/v1/db/trajectories/{name}/evals", params=[("label", "suite"), ("label", "reviewed")])
    assert both.json()["total"] == 1
    assert c.get(f"/api/v1/db/trajectories/{name}/evals", params={"label": "=x"}).status_code == 422

    stats = c.get(f"/api/v1/db/stats/{name}/evals").json()
    assert stats["total"] == 2 and stats["by_status"]["completed"] == 1 and stats["by_status"]["failed"] == 1
    assert stats["success_rate"] == 0.5 and stats["cost_usd"] == 0.25 and stats["cost_runs"] == 1
    assert stats["duration_seconds"]["count"] == 2

    logs = c.get(f"/api/v1/workflows-logs/{name}-evals--e1").json()
    assert logs["trajectory_id"] == "e1" and logs["logs"] == [] and logs["has_more"] is False


def test_ingest_cannot_overwrite_a_run_of_another_collection(server, collection: Collection, base_image):
    from tests.support.api_server import make_collection

    _ingest(collection.client(), collection.name, "evals", "shared-id", output={"mine": 1})
    other = make_collection(server, base_image)
    theirs = _ingest(other.client(), other.name, "evals", "shared-id", output={"theirs": 1})
    assert theirs["trajectory_id"] == "shared-id", "an id is each collection's own to choose"
    kept = collection.record("evals", "shared-id")
    assert kept["collection"] == collection.name and kept["steps"]["run"]["outputs"]["output"] == {"mine": 1}
    logs = other.client().get("/api/v1/workflows-logs/shared-id")
    assert logs.status_code == 200 and logs.json()["workflow_id"] == f"{other.name}-evals--shared-id", (
        "another collection's token sees only its own run of that id"
    )


def test_step_templates_name_the_activities_and_their_schema(collection: Collection):
    c = collection.client()
    listed = c.get("/api/v1/step-templates").json()
    assert listed["total_count"] == len(listed["templates"]) and "control_flow" in listed["categories"]
    names = [t["activity_name"] for t in listed["templates"]]
    assert {"runbook", "litellm_chat", "simple_judge", "list_emit_await", "text_split"} <= set(names)
    template = next(t for t in listed["templates"] if t["name"] == "runbook")
    assert "timeout_sec" in template["config_schema"]["properties"]
    missing = c.get("/api/v1/step-templates/http_get")
    assert missing.status_code == 404 and "runbook" in missing.json()["detail"]


def test_without_trial_keys_the_trial_routes_say_so(collection: Collection):
    c = collection.client()
    collection.put_task("t", "echo hi > {{results_dir}}/x")
    status = c.get(f"/api/v1/trial/{collection.name}").json()
    assert status["available"] is False and status["runs_remaining"] == 0
    assert "PIER_TRIAL_KEYS" in status["message"]
    activate = c.post(f"/api/v1/trial/{collection.name}/activate")
    assert activate.status_code == 422 and "PIER_TRIAL_KEYS" in activate.json()["detail"]
    run = c.post(f"/api/v1/run/{collection.name}/t", json={"use_trial_keys": True})
    assert run.status_code == 422 and "use_trial_keys" in run.json()["detail"], run.text
    sub = c.post(f"/api/v1/run/{collection.name}/t", json={"subscription_credential": "nous"})
    assert sub.status_code == 422 and "subscription_credential" in sub.json()["detail"]
