"""Health for load balancers, on a real server with its engine and database up
(tests/unit/cli/test_engine_down.py covers them down)."""

from __future__ import annotations

import pytest
from tests.support.api_server import Server

pytestmark = pytest.mark.integration


def test_live_ready_and_health_answer_200_without_a_token(server: Server):
    with server.client(token=None) as c:
        live, ready, health = c.get("/health/live"), c.get("/health/ready"), c.get("/health")
    assert (live.status_code, live.json()) == (200, {"status": "ok"})
    # every dependency this mode needs, and Temporal named only in fleet mode
    assert (ready.status_code, ready.json()) == (
        200,
        {
            "status": "ready",
            "engine": "ok",
            "database": "ok",
            "storage": "ok",
            "temporal": None,
            "draining": None,
        },
    )
    assert health.status_code == 200
    assert {k: health.json()[k] for k in ("status", "engine", "database")} == {
        "status": "ok", "engine": "ok", "database": "ok",
    }  # fmt: skip
