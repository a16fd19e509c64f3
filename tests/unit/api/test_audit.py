"""The audit log: every request that could change something writes exactly one
entry, whoever sent it and however it ended; names only, never a value; a
collection reads its own entries and no one else's."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pier.api.app import create_app
from pier.settings import Settings, get_settings

ADMIN = "admin-token-for-audit"
SECRET_VALUE = "s3cr3t-value-never-logged"
PARAMS = {
    "collection": "team-a",
    "task": "t",
    "trajectory_id": "0" * 32,
    "token_id": "1",
    "routine_id": "1",
    "name": "X",
    "path": "results/a.txt",
}


@pytest.fixture
def client(pier_home, monkeypatch) -> Iterator[TestClient]:
    monkeypatch.setenv("PIER_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    monkeypatch.setenv("PIER_SWEEP_INTERVAL_SEC", "3600")
    get_settings.cache_clear()
    with TestClient(create_app(Settings())) as client:
        yield client


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


def entries(client: TestClient, headers: dict[str, str] | None = None, **query: str) -> list[dict]:
    response = client.get("/api/v1/audit", headers=headers or admin(), params={"limit": 1000, **query})
    assert response.status_code == 200, response.text
    return response.json()


def changing_routes(client: TestClient) -> list[tuple[str, str]]:
    spec = client.get("/openapi.json").json()
    return [
        (method.upper(), path)
        for path, item in spec["paths"].items()
        for method in item
        if method.upper() not in {"GET", "HEAD", "OPTIONS"}
    ]


def concrete(template: str) -> str:
    return re.sub(r"\{(\w+)(?::path)?\}", lambda m: PARAMS.get(m.group(1), "x"), template)


def test_every_changing_route_writes_exactly_one_entry_with_its_template(client: TestClient) -> None:
    client.post("/api/v1/collections", json={"name": "team-a"}, headers=admin())
    routes = changing_routes(client)
    assert len(routes) >= 15, routes  # the walk covers the API, not a handful of routes
    for method, template in routes:
        before = {e["id"] for e in entries(client)}
        response = client.request(method, concrete(template), headers=admin(), json={})
        assert response.status_code < 500, (method, template, response.text)
        new = [e for e in entries(client) if e["id"] not in before]
        assert len(new) == 1, (method, template, new)
        assert new[0]["action"] == f"{method} {template}"
        assert new[0]["status"] == response.status_code
        assert new[0]["actor"] == "admin"


def test_refusals_are_recorded_with_who_sent_them(client: TestClient) -> None:
    client.post("/api/v1/collections", json={"name": "team-a"}, headers=admin())
    response = client.delete("/api/v1/collections/team-a/tokens/1")
    assert response.status_code == 401
    response = client.delete("/api/v1/collections/team-a/tokens/1", headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    refused = [
        e
        for e in entries(client)
        if e["action"] == "DELETE /api/v1/collections/{collection}/tokens/{token_id}"
    ]
    assert [e["actor"] for e in refused] == ["unknown-token", "anonymous"]
    assert all(e["status"] == 401 and e["collection"] == "team-a" for e in refused)


def test_a_token_is_named_by_its_id_and_label_and_secret_values_never_appear(client: TestClient) -> None:
    token = client.post("/api/v1/collections", json={"name": "team-a"}, headers=admin()).json()["token"]
    theirs = {"Authorization": f"Bearer {token}"}
    response = client.patch(
        "/api/v1/collections/team-a/environment",
        json={"environment_variables": {"API_KEY": SECRET_VALUE, "OLD": None}},
        headers=theirs,
    )
    assert response.status_code == 200, response.text
    everything = entries(client)
    assert SECRET_VALUE not in json.dumps(everything)
    patch = next(e for e in everything if e["action"].startswith("PATCH"))
    assert patch["target"]["set"] == ["API_KEY"] and patch["target"]["removed"] == ["OLD"]
    assert patch["actor"].startswith("token:") and patch["token_id"] is not None
    assert patch["collection"] == "team-a"


def test_a_collection_reads_its_own_entries_only(client: TestClient) -> None:
    a = client.post("/api/v1/collections", json={"name": "team-a"}, headers=admin()).json()["token"]
    b = client.post("/api/v1/collections", json={"name": "team-b"}, headers=admin()).json()["token"]
    for collection, token in (("team-a", a), ("team-b", b)):
        client.patch(
            f"/api/v1/collections/{collection}/environment",
            json={"environment_variables": {"V": "1"}},
            headers={"Authorization": f"Bearer {token}"},
        )
    seen_by_a = entries(client, {"Authorization": f"Bearer {a}"})
    assert seen_by_a and {e["collection"] for e in seen_by_a} == {"team-a"}
    asked = client.get(
        "/api/v1/audit", params={"collection": "team-b"}, headers={"Authorization": f"Bearer {a}"}
    )
    assert asked.status_code == 403
    assert {"team-a", "team-b"} <= {e["collection"] for e in entries(client)}  # the admin sees all


def test_reads_are_not_audited(client: TestClient) -> None:
    client.post("/api/v1/collections", json={"name": "team-a"}, headers=admin())
    before = len(entries(client))
    for _ in range(3):
        client.get("/api/v1/collections", headers=admin())
    assert len(entries(client)) == before


def test_the_audit_page_filters_and_shows_a_collection_its_own(pier_home, monkeypatch) -> None:
    from pier import web

    monkeypatch.setenv("PIER_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    get_settings.cache_clear()
    with TestClient(create_app(Settings(), pages=web.install)) as client:
        a = client.post("/api/v1/collections", json={"name": "team-a"}, headers=admin()).json()["token"]
        client.post("/api/v1/collections", json={"name": "team-b"}, headers=admin())
        client.patch("/api/v1/collections/team-b/environment", json={"environment_variables": {"ONLY_B": "v"}},
                     headers=admin())  # fmt: skip
        client.patch("/api/v1/collections/team-a/environment", json={"environment_variables": {"ONLY_A": "v"}},
                     headers={"Authorization": f"Bearer {a}"})  # fmt: skip
        client.cookies.set("pier_session", ADMIN)
        everything = client.get("/audit").text
        assert "ONLY_A" in everything and "ONLY_B" in everything
        filtered = client.get("/audit", params={"collection": "team-b"}).text
        assert "ONLY_B" in filtered and "ONLY_A" not in filtered
        client.cookies.set("pier_session", a)
        theirs = client.get("/audit").text
        assert "ONLY_A" in theirs and "ONLY_B" not in theirs
        assert client.get("/audit", params={"collection": "team-b"}).status_code == 403
