"""The routine routes over HTTP against a real `pier serve` (SQLite and
PostgreSQL): each of the nine, both trailing-slash forms, and every refusal."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta

import pytest
from tests.support.api_server import Collection, make_collection

from pier.db import Store
from pier.record import utcnow

pytestmark = pytest.mark.integration

SCRIPT = "echo tick {{who}} > {{results_dir}}/tick.txt"  # {{who}}: the variable routines give


def routines_url(collection: Collection, *rest: str) -> str:
    return "/".join(["/api/v1/routines", collection.name, *rest])


def test_every_routine_route(collection: Collection):
    collection.put_task("tick", SCRIPT)
    c = collection.client()
    body = {"name": "nightly", "cron_expression": "0 3 * * *", "timezone": "Europe/Berlin",
            "init_params": {"vars": {"who": "cron"}}, "description": "every night"}  # fmt: skip
    created = c.post(routines_url(collection, "tick"), json=body)
    assert created.status_code == 201, created.text
    routine = created.json()
    assert isinstance(routine["id"], int)
    assert routine | body == routine  # every field sent comes back as sent
    assert routine["status"] == "active" and routine["enabled"] is True
    assert routine["next_run_at"].endswith(("01:00:00Z", "02:00:00Z"))  # 03:00 Berlin, in UTC
    one = routines_url(collection, "tick", "nightly")

    for url in (routines_url(collection), routines_url(collection) + "/"):
        listed = c.get(url)
        assert listed.status_code == 200, (url, listed.status_code)  # answered, not redirected
        assert [r["name"] for r in listed.json()] == ["nightly"]
    for url in (routines_url(collection, "tick"), routines_url(collection, "tick") + "/"):
        assert [r["id"] for r in c.get(url).json()] == [routine["id"]]
    assert c.get(routines_url(collection, "other-task")).json() == []
    for url in (one, one + "/"):
        assert c.get(url).json()["id"] == routine["id"]

    changed = c.patch(one, json={"cron_expression": "@hourly", "timezone": "UTC"})
    assert changed.status_code == 200, changed.text
    assert changed.json()["cron_expression"] == "@hourly"
    assert changed.json()["next_run_at"].endswith(":00:00Z")
    assert changed.json()["init_params"] == body["init_params"]  # not sent, not changed

    paused = c.post(one + "/pause").json()
    assert paused["status"] == "paused" and paused["next_run_at"] is None
    resumed = c.post(one + "/resume/").json()
    assert resumed["status"] == "active" and resumed["next_run_at"] is not None

    started = c.post(one + "/run-now")
    assert started.status_code == 200, started.text
    tid = started.json()["trajectory_id"]
    assert started.json()["workflow_id"] == f"{collection.name}-tick--{tid}"
    record = collection.wait("tick", tid)
    assert record["status"] == "completed", record
    assert record["triggered_by_routine_id"] == routine["id"]
    assert record["init_params"]["vars"] == {"who": "cron"}
    assert c.get(one).json()["last_trajectory_id"] == tid

    for url in (one + "/runs", one + "/runs/?limit=5"):
        runs = c.get(url)
        assert runs.status_code == 200, runs.text
        assert runs.json()["routine_id"] == routine["id"]
        assert [r["trajectory_id"] for r in runs.json()["trajectories"]] == [tid]
    assert c.get(one + "/runs?limit=0").status_code == 422

    deleted = c.delete(one)
    assert deleted.status_code == 200 and deleted.json()["id"] == routine["id"]
    assert c.get(one).status_code == 404
    assert collection.record("tick", tid)["triggered_by_routine_id"] == routine["id"]  # its run stays


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cron_expression": "61 * * * *"}, "cron_expression"),
        ({"cron_expression": "0 3 * *"}, "cron_expression"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"name": "../x"}, "name"),
        ({"init_params": {"webhook_secret": "s"}}, "init_params.webhook_secret"),
        ({"init_params": {"vars": "x"}}, "init_params"),
        ({"cronexpr": "@daily"}, "cronexpr"),  # unknown fields are refused, named
        ({"cron_expression": None}, "cron_expression"),
        ({"cron_expression": "0 0 1 1 " + "1," * 200 + "1"}, "cron_expression"),
        ({"timezone": "A/" * 40}, "timezone"),
    ],
)
def test_bad_routine_fields_are_422_naming_the_field(collection: Collection, body, field):
    collection.put_task("tick", SCRIPT)
    c = collection.client()
    r = c.post(routines_url(collection, "tick"), json={"name": "r", "cron_expression": "@daily", **body})
    assert r.status_code == 422, r.text
    assert field in [e["field"] for e in r.json()["errors"]], r.json()
    assert c.get(routines_url(collection)).json() == []


def test_routine_refusals(collection: Collection):
    collection.put_task("tick", SCRIPT)
    c = collection.client()
    unknown_task = c.post(routines_url(collection, "nope"), json={"name": "r", "cron_expression": "@daily"})
    assert unknown_task.status_code == 422
    assert unknown_task.json()["errors"][0]["field"] == "task"
    assert "push it first" in unknown_task.json()["detail"]

    made = c.post(routines_url(collection, "tick"), json={"name": "r", "cron_expression": "@daily"})
    assert made.status_code == 201
    again = c.post(routines_url(collection, "tick"), json={"name": "r", "cron_expression": "@hourly"})
    assert again.status_code == 409 and "exists" in again.json()["detail"]

    one = routines_url(collection, "tick", "r")
    bad = c.patch(one, json={"timezone": "Nowhere/Land"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "timezone"
    assert c.get(one).json()["timezone"] == "UTC"  # unchanged
    assert c.patch(one, json={"name": "renamed"}).status_code == 422

    missing = routines_url(collection, "tick", "missing")
    for method, url in [("GET", missing), ("PATCH", missing), ("DELETE", missing),
                        ("POST", missing + "/pause"), ("POST", missing + "/resume"),
                        ("POST", missing + "/run-now"), ("GET", missing + "/runs")]:  # fmt: skip
        r = c.request(method, url, json={} if method == "PATCH" else None)
        assert r.status_code == 404, (method, url, r.text)
        assert "not found" in r.json()["detail"]


def test_routine_routes_need_the_collections_token(server, collection: Collection, base_image):
    collection.put_task("tick", SCRIPT)
    assert (
        collection.client()
        .post(routines_url(collection, "tick"), json={"name": "r", "cron_expression": "@daily"})
        .status_code
        == 201
    )
    other = make_collection(server, base_image).client()
    anonymous = server.client(token=None)
    one = routines_url(collection, "tick", "r")
    for method, url in [("GET", routines_url(collection)), ("GET", routines_url(collection, "tick")),
                        ("POST", routines_url(collection, "tick")), ("GET", one), ("PATCH", one),
                        ("DELETE", one), ("POST", one + "/pause"), ("POST", one + "/resume"),
                        ("POST", one + "/run-now"), ("GET", one + "/runs")]:  # fmt: skip
        body = (
            {"name": "x", "cron_expression": "@daily"} if method == "POST" and url.endswith("tick") else None
        )
        assert other.request(method, url, json=body).status_code == 403, (method, url)
        assert anonymous.request(method, url, json=body).status_code == 401, (method, url)
    admin = server.client()
    assert [r["name"] for r in admin.get(routines_url(collection)).json()] == ["r"]
    assert admin.get("/api/v1/routines/no-such-collection").status_code == 404


def test_a_tick_whose_run_cannot_start_is_recorded_failed(server, collection: Collection):
    """The task needs a secret the collection has not got: the tick still shows
    among the routine's runs, failed, saying why."""
    collection.put_task("needs-key", SCRIPT, secrets={"API_KEY": {"required": True}})
    c = collection.client()
    made = c.post(routines_url(collection, "needs-key"), json={"name": "r", "cron_expression": "@yearly"})
    assert made.status_code == 201, made.text
    with Store.open(server.db_url) as store:  # as if its tick came a minute ago
        store.update_routine(made.json()["id"], next_run_at=utcnow() - timedelta(minutes=1))
    one = routines_url(collection, "needs-key", "r")
    deadline = time.monotonic() + 60
    while not (runs := c.get(one + "/runs").json()["trajectories"]):
        assert time.monotonic() < deadline, "the due tick did not fire"
        time.sleep(0.2)
    (run,) = runs
    assert run["status"] == "failed" and run["triggered_by_routine_id"] == made.json()["id"]
    assert "routine 'r' could not start its run" in run["error"]
    assert "API_KEY" in run["error"]
    assert c.get(one).json()["last_trajectory_id"] == run["trajectory_id"]


def test_pier_routine_commands_act_on_the_servers_store(server, collection: Collection):
    """`pier routine create` and `run-now` from the shell: the server picks the
    request up at its next poll and starts one run, paused or not."""
    collection.put_task("tick", SCRIPT)

    def pier(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pier.cli", "routine", *args],
                              capture_output=True, text=True, env=server.env(), timeout=120)  # fmt: skip

    made = pier("create", collection.name, "tick", "cli", "--cron", "@yearly", "--paused", "--var", "who=cli")
    assert made.returncode == 0, made.stderr
    assert "created" in made.stdout
    one = routines_url(collection, "tick", "cli")
    c = collection.client()
    assert c.get(one).json()["status"] == "paused"
    asked = pier("run-now", collection.name, "tick", "cli")
    assert asked.returncode == 0, asked.stderr
    deadline = time.monotonic() + 60
    while not (runs := c.get(one + "/runs").json()["trajectories"]):
        assert time.monotonic() < deadline, "the server did not start the requested run"
        time.sleep(0.2)
    record = collection.wait("tick", runs[0]["trajectory_id"])
    assert record["status"] == "completed" and record["init_params"]["vars"] == {"who": "cli"}
    assert len(c.get(one + "/runs").json()["trajectories"]) == 1
    assert c.get(one).json()["status"] == "paused"
    assert pier("delete", collection.name, "tick", "cli").returncode == 0
    assert c.get(one).status_code == 404
