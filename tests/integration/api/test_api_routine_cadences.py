"""Routines as the platform's clients (its MCP server) make them: a cadence
instead of a cron expression, init_params_overrides, secret_params, paused and
a webhook, over HTTP against a real `pier serve`, with each of the platform's rules."""

from __future__ import annotations

import hashlib

import pytest
from tests.support.api_server import Collection

pytestmark = pytest.mark.integration

SCRIPT = 'echo "tick {{who}}" > {{results_dir}}/tick.txt; printf %s "$ROUTINE_TOKEN" | sha256sum > {{results_dir}}/s.txt'


def url(collection: Collection, *rest: str) -> str:
    return "/".join(["/api/v1/routines", collection.name, *rest])


@pytest.mark.parametrize(
    ("cadence", "cron", "ends"),
    [
        ({"type": "hourly", "minute_utc": 15}, "15 * * * *", ":15:00Z"),
        ({"type": "daily", "hour_utc": 9, "minute_utc": 0}, "0 9 * * *", "T09:00:00Z"),
        ({"type": "weekdays", "hour_utc": 7, "minute_utc": 30}, "30 7 * * 1-5", "T07:30:00Z"),
        ({"type": "weekly", "day_of_week": "mon", "hour_utc": 9}, "0 9 * * 1", "T09:00:00Z"),
    ],
)
def test_each_scheduled_cadence(collection: Collection, cadence, cron, ends):
    collection.put_task("tick", SCRIPT, vars={"who": "task"})
    with collection.client() as c:
        r = c.post(url(collection, "tick"), json={"name": "daily-summary", "cadence": cadence,
                                                 "init_params_overrides": {"vars": {"who": "x"}}})  # fmt: skip
        assert r.status_code == 201, r.text
        routine = r.json()
        assert routine["cadence"]["type"] == cadence["type"]
        assert routine["cron_expression"] == cron and routine["timezone"] == "UTC"
        assert routine["next_run_at"].endswith(ends), routine["next_run_at"]
        assert routine["init_params_overrides"] == {"vars": {"who": "x"}} == routine["init_params"]
        assert routine["paused"] is False and routine["status"] == "active"
        assert c.get(url(collection, "tick", "daily-summary")).json()["cadence"] == routine["cadence"]


def test_a_manual_routine_is_a_preset_only_run_now_fires(collection: Collection):
    collection.put_task("tick", SCRIPT, vars={"who": "task"})
    with collection.client() as c:
        r = c.post(url(collection, "tick"), json={
            "name": "preset", "cadence": {"type": "manual"},
            "init_params_overrides": {"vars": {"who": "manual"}},
            "secret_params": {"ROUTINE_TOKEN": "s3cr3t-value"},
            "webhook_url": "https://hooks.example.invalid/x", "webhook_secret": "whsec",
        })  # fmt: skip
        assert r.status_code == 201, r.text
        routine = r.json()
        assert routine["next_run_at"] is None and routine["cron_expression"] == ""
        assert routine["secret_params"] == ["ROUTINE_TOKEN"] and "s3cr3t-value" not in r.text
        assert routine["webhook_url"] == "https://hooks.example.invalid/x" and routine["has_webhook_secret"]
        assert "whsec" not in r.text
        started = c.post(url(collection, "tick", "preset", "run-now"))
        assert started.status_code == 200, started.text
    tid = started.json()["workflow_id"].rsplit("--", 1)[-1]
    record = collection.wait("tick", tid)
    assert record["triggered_by_routine_id"] == routine["id"]
    assert record["status"] == "completed", record.get("error")
    assert record["init_params"]["vars"] == {"who": "manual"}
    with collection.client() as c:
        files = {name: c.get(f"/api/v1/file/{collection.name}/tick/{tid}/results/{name}").text
                 for name in ("tick.txt", "s.txt")}  # fmt: skip
    assert files["tick.txt"].strip() == "tick manual"
    # the secret reached the run's environment, and only there
    assert files["s.txt"].split()[0] == hashlib.sha256(b"s3cr3t-value").hexdigest()
    assert "s3cr3t-value" not in str(record)


def test_patch_takes_any_subset(collection: Collection):
    collection.put_task("tick", SCRIPT, vars={"who": "task"})
    one = url(collection, "tick", "r")
    with collection.client() as c:
        assert c.post(url(collection, "tick"), json={"name": "r", "cadence": {"type": "daily", "hour_utc": 9},
                                                    "paused": True}).status_code == 201  # fmt: skip
        assert c.get(one).json()["paused"] is True and c.get(one).json()["next_run_at"] is None
        patched = c.patch(one, json={"paused": False}).json()
        assert patched["paused"] is False and patched["next_run_at"].endswith("T09:00:00Z")
        patched = c.patch(one, json={"cadence": {"type": "hourly", "minute_utc": 45}}).json()
        assert patched["cron_expression"] == "45 * * * *" and patched["next_run_at"].endswith(":45:00Z")
        patched = c.patch(one, json={"init_params_overrides": {"vars": {"who": "p"}}}).json()
        assert patched["init_params"] == {"vars": {"who": "p"}}
        patched = c.patch(
            one, json={"secret_params": {"A": "1", "B": "2"}, "webhook_url": "https://h.invalid/"}
        )
        assert (
            patched.json()["secret_params"] == ["A", "B"]
            and patched.json()["webhook_url"] == "https://h.invalid/"
        )
        patched = c.patch(one, json={"cron_expression": "0 3 * * *", "timezone": "Europe/Berlin"}).json()
        assert patched["cadence"] is None and patched["timezone"] == "Europe/Berlin"  # a cron routine now
        patched = c.patch(one, json={"cadence": {"type": "manual"}}).json()
        assert patched["next_run_at"] is None and patched["timezone"] == "UTC"
        assert c.patch(one, json={"cadence": {"type": "weekly", "hour_utc": 9}}).status_code == 400
        assert c.get(one).json()["cadence"] == {"type": "manual"}  # a refused patch changes nothing


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"cadence": {"type": "daily"}}, 400, "cadence.hour_utc"),
        ({"cadence": {"type": "weekdays", "minute_utc": 0}}, 400, "cadence.hour_utc"),
        ({"cadence": {"type": "weekly", "hour_utc": 9}}, 400, "cadence.day_of_week"),
        ({"cadence": {"type": "manual", "hour_utc": 9}}, 400, "cadence.hour_utc"),
        (
            {
                "cadence": {"type": "daily", "hour_utc": 9},
                "init_params_overrides": {"prompt": "x", "vars": {}},
            },
            400,
            "'prompt'",
        ),
        ({"cadence": {"type": "yearly"}}, 400, "cadence.type"),
        ({"cadence": {"type": "daily", "hour_utc": 9}, "cron_expression": "@daily"}, 422, "send only one"),
        ({"cadence": {"type": "daily", "hour_utc": 9}, "timezone": "Europe/Berlin"}, 422, "UTC"),
        ({}, 422, "cron_expression"),
        ({"cadence": {"type": "daily", "hour_utc": 9}, "secret_params": {"A": 1}}, 400, "secret_params.A"),
    ],
)
def test_the_platforms_rules(collection: Collection, body, status, says):
    collection.put_task("tick", SCRIPT)
    with collection.client() as c:
        r = c.post(url(collection, "tick"), json={"name": "r", **body})
        assert r.status_code == status, r.text
        assert says in r.text, r.text
        assert c.get(url(collection)).json() == []  # nothing stored
