"""Pause and resume of a kept sandbox over the API
(POST /api/v1/sandbox/{collection}/{id}/pause|resume): by the run's own
collection's token, never another's, and refused (409) for a run whose
sandbox is not kept (docs/sessions.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pier.api.app import create_app
from pier.errors import SandboxError
from pier.settings import Settings, get_settings
from tests.support.kept import kept_run

ADMIN = "admin-token-for-pause"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def client(pier_home, monkeypatch) -> Iterator[TestClient]:
    monkeypatch.setenv("PIER_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    monkeypatch.setenv("PIER_SWEEP_INTERVAL_SEC", "3600")
    get_settings.cache_clear()
    with TestClient(create_app(Settings())) as client:
        yield client


def token_of(client: TestClient, name: str) -> str:
    made = client.post("/api/v1/collections", json={"name": name}, headers=bearer(ADMIN))
    assert made.status_code == 201, made.text
    return made.json()["token"]


def test_the_collections_token_pauses_and_resumes_its_kept_sandbox(client: TestClient) -> None:
    mine = token_of(client, "team")
    record, sandbox = kept_run("team")
    url = f"/api/v1/sandbox/team/{record.trajectory_id}"
    paused = client.post(f"{url}/pause", headers=bearer(mine))
    assert paused.status_code == 200, paused.text
    assert paused.json() == {"collection": "team", "trajectory_id": record.trajectory_id,
                             "sandbox_id": sandbox.id, "paused": True}  # fmt: skip
    assert sandbox.frozen
    with pytest.raises(SandboxError, match="paused"):  # its processes are frozen: nothing runs in it
        sandbox.exec("true")
    resumed = client.post(f"{url}/resume", headers=bearer(mine))
    assert resumed.status_code == 200 and resumed.json()["paused"] is False, resumed.text
    assert not sandbox.frozen and sandbox.exec("true").ok


def test_another_collections_token_cannot_pause_it(client: TestClient) -> None:
    token_of(client, "team")
    theirs = token_of(client, "other")
    record, sandbox = kept_run("team")
    r = client.post(f"/api/v1/sandbox/team/{record.trajectory_id}/pause", headers=bearer(theirs))
    assert r.status_code == 403, r.text
    r = client.post(f"/api/v1/sandbox/other/{record.trajectory_id}/pause", headers=bearer(theirs))
    assert r.status_code == 404, r.text  # in their own collection the run is unknown
    assert not sandbox.frozen


def test_a_run_whose_sandbox_is_not_kept_is_refused_409_saying_why(client: TestClient) -> None:
    mine = token_of(client, "team")
    record, sandbox = kept_run("team", kept=False)
    r = client.post(f"/api/v1/sandbox/team/{record.trajectory_id}/pause", headers=bearer(mine))
    assert r.status_code == 409, r.text
    assert "was not kept" in r.json()["detail"] and "--keep" in r.json()["detail"]
    assert not sandbox.frozen
