"""Workflows over the API in-process (the embedded executor, SQLite, no Docker)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pier import web
from pier.api.app import create_app
from pier.settings import Settings

ADMIN = "admin-" + "w" * 40


class Api:
    def __init__(self, client: TestClient):
        self.c = client

    def task(self, name: str, workflow: dict[str, Any]) -> Any:
        return self.c.put(f"/api/v1/tasks/team/{name}", json={"workflow": workflow})

    def run(
        self, name: str, init_params: dict[str, Any] | None = None, timeout: float = 60
    ) -> dict[str, Any]:
        import json

        sent = self.c.post(f"/api/v1/run/team/{name}", data={"init_params": json.dumps(init_params or {})})
        assert sent.status_code in (200, 201, 202), sent.text
        tid = sent.json()["trajectory_id"]
        return self.wait(name, tid, timeout)

    def wait(self, name: str, tid: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.c.get(f"/api/v1/db/trajectory/team/{name}/{tid}").json()
            if got["status"] in ("completed", "failed", "cancelled"):
                return got
            time.sleep(0.05)
        raise AssertionError(f"run {tid} did not end in {timeout}s")


def make_settings(tmp_path: Path, **kw: Any) -> Settings:
    return Settings(
        home=tmp_path / "home",
        database_url=None,
        docker_host=f"unix://{tmp_path / 'no-engine.sock'}",
        sweep_interval_sec=3600,
        admin_token=ADMIN,
        **kw,
    )


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with TestClient(
        create_app(make_settings(tmp_path), pages=web.install), headers={"Authorization": f"Bearer {ADMIN}"}
    ) as c:
        assert c.post("/api/v1/collections", json={"name": "team"}).status_code in (200, 201)
        yield Api(c)
