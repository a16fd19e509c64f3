"""The queued_runs quota holds under concurrent accepts: N `POST /run` of one
collection sent at the same instant (a barrier lines them up, each on its own
open connection) against a queue with room for K leave exactly K runs waiting,
and the rest get 429 with Retry-After. On SQLite one real `pier serve`; on
PostgreSQL two servers sharing the database (replicas), the requests spread
over both."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from tests.integration.tenancy.conftest import SERVER_SETTINGS
from tests.support.api_server import ADMIN_TOKEN, Server, make_collection, postgres_schema

pytestmark = pytest.mark.integration

SENDERS = 12
ROOM = 3  # the collection's queued_runs
SETTINGS = {
    **SERVER_SETTINGS,
    "PIER_MAX_CONCURRENT_RUNS": "1",  # held by a long run, so every accepted run waits
    "PIER_TEST_AGENT_SEC": "600",
}


@pytest.fixture(params=["sqlite", "postgresql"])
def servers(request: pytest.FixtureRequest, tmp_path) -> Iterator[list[Server]]:
    home = tmp_path / "home"
    home.mkdir()
    if request.param == "sqlite":
        schema = None
        started = [Server(home=home, db_url=f"sqlite:///{home / 'pier.db'}", settings=SETTINGS).start()]
    else:
        schema = postgres_schema()
        db_url = next(schema)
        started = [Server(home=home, db_url=db_url, settings=SETTINGS).start() for _ in range(2)]
    yield started
    for server in started:
        server.stop()
    if schema is not None:
        next(schema, None)


def test_the_last_queued_place_is_taken_once(servers: list[Server]):
    first = servers[0]
    blocker = make_collection(first, "pier-fake:latest", prefix="blocker")
    blocker.put_task("t", "echo hold")
    team = make_collection(first, "pier-fake:latest", prefix="team")
    team.put_task("t", "echo hi")
    with first.client(ADMIN_TOKEN) as admin:
        r = admin.put(f"/api/v1/collections/{team.name}/quotas", json={"queued_runs": ROOM})
        assert r.status_code == 200, r.text
    for server in servers:  # each server's one slot held by another collection's long run
        with server.client(blocker.token) as c:
            r = c.post(f"/api/v1/run/{blocker.name}/t", json={})
        assert r.status_code == 200, r.text
        blocker.wait("t", r.json()["trajectory_id"], timeout=60, done=lambda rec: rec["status"] == "running")

    clients = [servers[i % len(servers)].client(team.token) for i in range(SENDERS)]
    for c in clients:  # the connection is open before the barrier, so the POSTs leave together
        assert c.get(f"/api/v1/collections/{team.name}/quotas").status_code == 200
    barrier = threading.Barrier(SENDERS)
    answers: list[httpx.Response] = []

    def send(c: httpx.Client) -> None:
        barrier.wait()
        answers.append(c.post(f"/api/v1/run/{team.name}/t", json={}))

    threads = [threading.Thread(target=send, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for c in clients:
        c.close()

    assert len(answers) == SENDERS
    codes = sorted(r.status_code for r in answers)
    accepted = [r for r in answers if r.status_code == 200]
    refused = [r for r in answers if r.status_code == 429]
    assert len(accepted) == ROOM and len(refused) == SENDERS - ROOM, codes
    assert all(int(r.headers["Retry-After"]) > 0 and "queued_runs" in r.text for r in refused)
    with first.client(team.token) as c:
        listed = c.get(f"/api/v1/db/trajectories/{team.name}/t", params={"limit": 100}).json()
    waiting = [t for t in listed["trajectories"] if t["status"] == "pending"]
    assert len(waiting) == ROOM, [t["status"] for t in listed["trajectories"]]
