"""With no engine answering, a run ends failed saying so (it never stays
pending), and the server's readiness says which part is down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pier.api.app import create_app
from pier.settings import Settings

RUNBOOK = "---\nagent: script\nsnapshot: ''\nimage: pier-base:bookworm\n---\n```bash\necho hi > {{results_dir}}/x\n```\n"


@pytest.fixture
def no_engine(tmp_path: Path) -> str:
    return f"unix://{tmp_path / 'no-engine.sock'}"


def pier(home: Path, engine: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIER_HOME": str(home), "PIER_DOCKER_HOST": engine}
    env.pop("PIER_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "pier.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_run_without_an_engine_ends_failed_with_the_reason(tmp_path, no_engine):
    (tmp_path / "RUNBOOK.md").write_text(RUNBOOK)
    home = tmp_path / "home"
    done = pier(home, no_engine, "run", str(tmp_path / "RUNBOOK.md"))
    assert done.returncode == 1, done.stderr
    assert "No Docker engine answers" in done.stderr
    records = [json.loads(line) for line in pier(home, no_engine, "runs", "--json").stdout.splitlines()]
    assert [r["status"] for r in records] == ["failed"]
    assert "No Docker engine answers at " + no_engine in records[0]["error"]


def test_readiness_names_the_engine_and_liveness_stays_up(tmp_path, no_engine):
    settings = Settings(
        home=tmp_path / "home", database_url=None, docker_host=no_engine, sweep_interval_sec=3600
    )
    with TestClient(create_app(settings)) as client:
        live = client.get("/health/live")
        ready = client.get("/health/ready")
        health = client.get("/health")
    assert live.status_code == 200 and live.json() == {"status": "ok"}
    assert ready.status_code == 503
    body = ready.json()
    assert body["status"] == "unready" and body["database"] == "ok"
    assert body["engine"].startswith(f"No Docker engine answers at {no_engine}")
    assert health.status_code == 200
    assert health.json()["status"] == "degraded" and health.json()["engine"] == body["engine"]


def test_readiness_names_the_database(tmp_path, no_engine):
    settings = Settings(
        home=tmp_path / "home", database_url=None, docker_host=no_engine, sweep_interval_sec=3600
    )
    with TestClient(create_app(settings)) as client:
        client.app.state.pier.services.store.close()  # type: ignore[attr-defined]
        for file in (tmp_path / "home").glob("pier.db*"):
            file.unlink()
        (tmp_path / "home" / "pier.db").mkdir()  # where the database was, nothing SQLite can open
        ready = client.get("/health/ready")
    assert ready.status_code == 503
    assert ready.json()["database"].startswith("the database does not answer")


def test_an_api_run_without_an_engine_ends_failed_with_the_reason(tmp_path, no_engine):
    admin = "admin-" + "y" * 40
    settings = Settings(
        home=tmp_path / "home", docker_host=no_engine, sweep_interval_sec=3600, admin_token=admin
    )
    with TestClient(create_app(settings)) as client:
        token = client.post(
            "/api/v1/collections", json={"name": "down"}, headers={"Authorization": f"Bearer {admin}"}
        ).json()["token"]
        auth = {"Authorization": f"Bearer {token}"}
        put = client.put(
            "/api/v1/tasks/down/t", content=RUNBOOK, headers={**auth, "Content-Type": "text/markdown"}
        )
        assert put.status_code == 200, put.text
        tid = client.post("/api/v1/run/down/t", json={}, headers=auth).json()["trajectory_id"]
        deadline = time.monotonic() + 60
        while (record := client.get(f"/api/v1/db/trajectory/down/t/{tid}", headers=auth).json())[
            "status"
        ] in (
            "pending",
            "running",
        ):
            assert time.monotonic() < deadline, "the run stayed " + record["status"]
            time.sleep(0.1)
    assert record["status"] == "failed"
    assert record["error"].startswith(f"No Docker engine answers at {no_engine}")
