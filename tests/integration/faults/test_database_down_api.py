"""The API while its database is down: PostgreSQL (a cluster of the test's
own) is stopped as on a crash. Every route that needs the database answers
503 with Retry-After and says the database is unreachable (never a 500 or a
stack trace), the web UI's pages a short 503 page, routes that do not need it
(liveness, metrics) answer as ever, and once the database is back each route
answers as before, with nothing done twice."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.integration.faults.conftest import fresh_schema
from tests.support.api_server import ADMIN_TOKEN, Collection, Server, make_collection
from tests.support.fleet import FAKE_BACKEND, REPO, wait_for
from tests.support.private import Postgres

pytestmark = pytest.mark.integration


@pytest.fixture
def collection(tmp_path: Path, private_pg: Postgres) -> Iterator[Collection]:
    """A `pier serve` (the in-process executor, the fake backend) on a fresh
    schema of the private PostgreSQL, and a collection with task `t`."""
    with fresh_schema(private_pg, "pier_dbdown") as db_url:
        yield from _served(tmp_path, db_url)


def _served(tmp_path: Path, db_url: str) -> Iterator[Collection]:
    home = tmp_path / "home"
    home.mkdir()
    settings = {
        "PIER_SANDBOX_BACKEND": FAKE_BACKEND,
        "PIER_TEST_SANDBOX_MARKS": str(home / "sandboxes"),
        "PIER_METRICS_TOKEN": "metrics-" + "m" * 32,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    server = Server(home, db_url, settings=settings).start()
    try:
        made = make_collection(server, "pier-fake:latest", prefix="dbdown")
        made.put_task("t", "echo hi")
        yield made
    finally:
        server.stop()


def _requests(collection: Collection, tid: str) -> list[tuple[str, str, dict]]:
    """(method, path, httpx keywords): reads, writes, the admin's and a collection's."""
    name = collection.name
    return [
        ("GET", "/api/v1/runs", {}),
        ("GET", f"/api/v1/tasks/{name}/t", {}),
        ("GET", f"/api/v1/db/trajectory/{name}/t/{tid}", {}),
        ("GET", f"/api/v1/runs/{tid}/events", {}),
        ("GET", f"/api/v1/collections/{name}", {}),
        ("POST", f"/api/v1/run/{name}/t", {"json": {}}),
        ("PATCH", f"/api/v1/collections/{name}/environment", {"json": {"environment_variables": {"DOWN_KEY": "v"}}}),
        ("PUT", f"/api/v1/tasks/{name}/t2", {"content": "---\nagent: script\nimage: pier-fake:latest\n"
                                              "snapshot: ''\n---\n# t2\n\n```bash\necho 2\n```\n",
                                              "headers": {"Content-Type": "text/markdown"}}),
    ]  # fmt: skip


def test_every_route_answers_503_while_the_database_is_down(
    collection: Collection, private_pg: Postgres
) -> None:
    tid = collection.run("t")
    assert collection.wait("t", tid)["status"] == "completed"
    server = collection.server
    tokens = {"admin": ADMIN_TOKEN, "collection": collection.token}

    private_pg.stop()
    try:
        for who, token in tokens.items():
            with server.client(token, timeout=30) as c:
                for method, path, kwargs in _requests(collection, tid):
                    r = c.request(method, path, **kwargs)
                    what = f"{method} {path} as {who}"
                    assert r.status_code == 503, f"{what}: {r.status_code} {r.text[:500]}"
                    assert int(r.headers["Retry-After"]) > 0, what
                    detail = r.json()["detail"]
                    assert "database" in detail and "Traceback" not in detail, f"{what}: {detail}"
        with server.client(None, timeout=30) as c:
            ready = c.get("/health/ready")
            assert ready.status_code == 503 and ready.json()["database"] != "ok", ready.text
            assert "database" in ready.json()["database"], ready.text
            assert c.get("/health/live").status_code == 200
            health = c.get("/health")
            assert health.status_code == 200 and health.json()["database"] != "ok", health.text
            # an unknown token cannot be looked up: that is the database's 503, not a 401
            unknown = c.get("/api/v1/runs", headers={"Authorization": "Bearer not-a-token"})
            assert unknown.status_code == 503, unknown.text
            scraped = c.get("/metrics", headers={"Authorization": "Bearer " + "metrics-" + "m" * 32})
            assert scraped.status_code == 200, scraped.text  # the metrics do not need the database
        with httpx.Client(base_url=server.url, timeout=30, cookies={"pier_session": ADMIN_TOKEN}) as browser:
            for path in ("/runs", f"/runs/{tid}", f"/tasks/{collection.name}/t", "/collections"):
                page = browser.get(path)
                assert page.status_code == 503, f"page {path}: {page.status_code} {page.text[:300]}"
                assert page.headers["content-type"].startswith("text/html"), path
                assert int(page.headers["Retry-After"]) > 0, path
                assert "database" in page.text and "Traceback" not in page.text, page.text[:500]
    finally:
        private_pg.start()

    with server.client(None, timeout=30) as c:
        wait_for(lambda: c.get("/health/ready").status_code == 200, 60, "ready once the database is back")
    with server.client(ADMIN_TOKEN) as c:
        for method, path, kwargs in _requests(collection, tid):
            if path.endswith("/events"):
                continue  # a stream: read below
            r = c.request(method, path, **kwargs)
            assert r.status_code in (200, 201), f"{method} {path} after: {r.status_code} {r.text[:300]}"
        runs = c.get("/api/v1/runs", params={"collection": collection.name}).json()
    with httpx.Client(base_url=server.url, timeout=30, cookies={"pier_session": ADMIN_TOKEN}) as browser:
        page = browser.get("/runs")
        assert page.status_code == 200, page.text[:300]
    second = [r for r in _items(runs) if r["trajectory_id"] != tid]
    assert len(second) == 1, f"one run accepted after the outage, none during it: {runs}"
    assert collection.wait("t", second[0]["trajectory_id"])["status"] == "completed"
    with httpx.Client(base_url=server.url, timeout=10) as c:
        events = c.get(f"/api/v1/runs/{tid}/events", headers={"Authorization": f"Bearer {collection.token}"})
        assert events.status_code == 200 and "event: end" in events.text, events.text[:300]


def _items(listing: object) -> list[dict]:
    if isinstance(listing, dict):
        for key in ("items", "runs", "trajectories"):
            if isinstance(listing.get(key), list):
                return listing[key]
    assert isinstance(listing, list), listing
    return listing
