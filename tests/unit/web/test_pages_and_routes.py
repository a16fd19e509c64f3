"""A page and the API's route over the same service do the same: the same
change, the same refusal (a page shows the route's message), the same audit
entry (names, never a value)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pier import web
from pier.api.app import create_app
from pier.db import Store
from pier.record import Trajectory
from pier.settings import Settings, get_settings
from pier.web.session import csrf_token

ADMIN = "admin-token-for-pages"


@pytest.fixture
def client(pier_home, monkeypatch) -> Iterator[TestClient]:
    monkeypatch.setenv("PIER_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    monkeypatch.setenv("PIER_SWEEP_INTERVAL_SEC", "3600")
    get_settings.cache_clear()
    with TestClient(create_app(Settings(), pages=web.install)) as client:
        client.post("/api/v1/collections", json={"name": "team"}, headers=api())
        client.cookies.set("pier_session", ADMIN)
        yield client


def api() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


def form(**fields: str) -> dict[str, str]:
    return {"csrf": csrf_token(ADMIN), **fields}


def audit_of(client: TestClient, action: str) -> list[dict]:
    found = client.get("/api/v1/audit", headers=api(), params={"action": action}).json()
    return [e for e in found if e["action"].endswith(action)]


def test_the_environment_form_changes_and_audits_as_the_route_does(client: TestClient) -> None:
    sent = client.post("/collections/team/environment", data=form(name="WEB_VAR", value="s3cr3t"),
                       follow_redirects=False)  # fmt: skip
    assert sent.status_code == 303, sent.text
    names = client.get("/api/v1/collections/team/environment", headers=api()).json()
    assert names["names"] == ["WEB_VAR"] and list(names["environment_variables"]) == ["WEB_VAR"]
    (entry,) = audit_of(client, "/collections/{collection}/environment")
    assert entry["action"] == "POST /collections/{collection}/environment"
    assert entry["target"] == {"collection": "team", "set": ["WEB_VAR"], "removed": []}
    assert "s3cr3t" not in json.dumps(entry)
    client.post("/collections/team/environment", data=form(delete="WEB_VAR"), follow_redirects=False)
    assert (
        client.get("/api/v1/collections/team/environment", headers=api()).json()["environment_variables"]
        == {}
    )


def test_a_page_refuses_with_the_routes_message(client: TestClient) -> None:
    by_api = client.patch("/api/v1/collections/team/environment", headers=api(),
                          json={"environment_variables": {"1BAD": "x"}})  # fmt: skip
    assert by_api.status_code == 422
    by_page = client.post("/collections/team/environment", data=form(name="1BAD", value="x"))
    assert by_page.status_code == 422
    detail = by_api.json()["detail"]
    assert "environment_variables.1BAD" in detail
    assert detail.replace("'", "&#39;") in by_page.text


def test_a_label_from_the_page_is_the_runs_label_in_the_api(client: TestClient, pier_home) -> None:
    record = Trajectory.new(uuid.uuid4().hex, "team", "t")
    with Store.open(Settings().db_url) as store:
        store.create_run(record)
    sent = client.post(f"/runs/{record.trajectory_id}/labels", data=form(key="review", value="good"),
                       follow_redirects=False)  # fmt: skip
    assert sent.status_code == 303, sent.text
    got = client.get(f"/api/v1/db/trajectory/team/t/{record.trajectory_id}", headers=api()).json()
    assert [(x["key"], x["value"], x["author"]) for x in got["labels"]] == [("review", "good", "team")]
    refused = client.post(f"/runs/{record.trajectory_id}/labels", data=form(key=" ", value="x"))
    assert refused.status_code == 422


def test_the_run_page_shows_each_checks_kind_runner_and_status(client: TestClient) -> None:
    from pier.record import CheckResult, RunStatus, utcnow

    record = Trajectory.new(uuid.uuid4().hex, "team", "t")
    record.finish(RunStatus.completed, utcnow(), 1.0)
    record.outputs.checks = [
        CheckResult(
            name="outputs-exist",
            type="command",
            passed=False,
            exit_code=1,
            status="fail",
            runner="jetty",
            title="Every output exists",
        ),
        CheckResult(name="look", type="agent", passed=False, status="skipped", runner="agent"),
        CheckResult(name="bad", type="invalid", passed=False, status="error", runner="jetty"),
    ]
    record.outputs.eval = {"version": 2, "verdict": "FAIL", "overall_passed": False, "checks": "0/3",
                           "failed": ["code_check:outputs-exist", "code_check:bad"]}  # fmt: skip
    with Store.open(Settings().db_url) as store:
        store.create_run(record)
    got = client.get(f"/runs/{record.trajectory_id}")
    assert got.status_code == 200, got.text[:2000]
    page = got.text
    assert '<table class="checks">' in page, page[page.find("checks-h") - 200 : page.find("checks-h") + 800]
    rows = page.split('<table class="checks">')[1].split("</table>")[0]
    assert "<th>Kind</th><th>Runner</th><th>Status</th>" in rows
    assert '<td>command</td><td>jetty</td><td class="bad">fail</td>' in rows
    assert '<td>agent</td><td>agent</td><td class="">skipped</td>' in rows
    assert '<td>invalid</td><td>jetty</td><td class="bad">error</td>' in rows
    assert "Every output exists" in rows
    assert "Entries passed" in page and "code_check:outputs-exist, code_check:bad" in page


def test_the_run_page_links_a_continued_run_and_its_parent(client: TestClient) -> None:
    from pier.record import RunStatus, utcnow

    parent, child = (
        Trajectory.new(uuid.uuid4().hex, "team", "t"),
        Trajectory.new(uuid.uuid4().hex, "team", "t"),
    )
    parent.finish(RunStatus.completed, utcnow(), 1.0)
    parent.outputs.sandbox.kept_until, parent.outputs.sandbox.id = 1_900_000_000.0, "c" * 64
    child.parent = parent.trajectory_id
    child.finish(RunStatus.completed, utcnow(), 1.0)
    child.outputs.sandbox.kept_until = 1_900_000_100.0
    with Store.open(Settings().db_url) as store:
        store.create_run(parent)
        store.create_run(child)
    kept = client.get(f"/runs/{parent.trajectory_id}").text
    assert f"--continue-from {parent.trajectory_id}" in kept and "1900000000" in kept
    page = client.get(f"/runs/{child.trajectory_id}").text
    assert f'<a href="/runs/{parent.trajectory_id}">' in page and "Continued from" in page
