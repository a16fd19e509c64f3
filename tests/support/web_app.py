"""The web UI and the API in one TestClient, on the fake fleet backend, signed
in as the admin, with collections made for the test (their tokens on
`client.tokens`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient

from pier import web
from pier.api.app import create_app
from pier.settings import Settings, get_settings


@contextmanager
def admin_web_client(
    monkeypatch: pytest.MonkeyPatch, admin: str, collections: tuple[str, ...] = ("team", "other")
) -> Iterator[TestClient]:
    monkeypatch.setenv("PIER_ADMIN_TOKEN", admin)
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    monkeypatch.setenv("PIER_SWEEP_INTERVAL_SEC", "3600")
    get_settings.cache_clear()
    with TestClient(create_app(Settings(), pages=web.install)) as client:
        client.tokens = {}  # type: ignore[attr-defined]
        for name in collections:
            made = client.post("/api/v1/collections", json={"name": name},
                               headers={"Authorization": f"Bearer {admin}"})  # fmt: skip
            assert made.status_code in (200, 201), made.text
            client.tokens[name] = made.json()["token"]  # type: ignore[attr-defined]
        client.cookies.set("pier_session", admin)
        yield client
