"""No integer a client sends gives a 500: every route's integer parameters (path
and query, from the OpenAPI document) are tried with values past what the
database holds (SQLite raised OverflowError on `before=-75015831126604955648`,
found by the schemathesis run)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pier.api.app import create_app
from pier.settings import Settings, get_settings

ADMIN = "admin-token-for-huge-integers"
HUGE = ("-75015831126604955648", "99999999999999999999999", str(2**63))
TEXT = {"collection": "team-a", "task": "t", "trajectory_id": "0" * 32, "name": "x", "path": "a.txt"}


@pytest.fixture
def client(pier_home, monkeypatch) -> Iterator[TestClient]:
    monkeypatch.setenv("PIER_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("PIER_SWEEP_INTERVAL_SEC", "3600")
    get_settings.cache_clear()
    with TestClient(create_app(Settings())) as client:
        client.post("/api/v1/collections", json={"name": "team-a"}, headers=auth())
        yield client


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


def integer_params(client: TestClient) -> list[tuple[str, str, str, str]]:
    """(method, path template, where, name) of every integer parameter of a GET route."""
    found = []
    for path, item in client.get("/openapi.json").json()["paths"].items():
        for method, operation in item.items():
            if method != "get":
                continue
            for param in operation.get("parameters", []):
                schema = param.get("schema", {})
                kinds = {schema.get("type")} | {s.get("type") for s in schema.get("anyOf", [])}
                if "integer" in kinds:
                    found.append((method.upper(), path, param["in"], param["name"]))
    return found


def test_no_integer_past_the_databases_range_gives_a_server_error(client: TestClient) -> None:
    params = integer_params(client)
    assert len(params) >= 3, params  # the walk found the routes it is about
    failures = []
    for method, template, where, name in params:
        for value in HUGE:
            path = re.sub(
                r"\{(\w+)(?::path)?\}",
                lambda m, name=name, value=value: value if m.group(1) == name else TEXT.get(m.group(1), "1"),
                template,
            )
            query = {name: value} if where == "query" else {}
            response = client.request(method, path, params=query, headers=auth())
            if response.status_code >= 500:
                failures.append(f"{method} {path} {query}: {response.status_code} {response.text[:200]}")
    assert not failures, "\n".join(failures)
