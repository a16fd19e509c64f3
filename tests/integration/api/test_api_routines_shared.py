"""Two real `pier serve` processes on one store (PostgreSQL, and SQLite too)
polling for due routines every 0.1 s: each due tick starts exactly one run, and
the routines outlive a restart of both, a tick missed while they were down
firing once when they are back."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from tests.support.api_server import Collection, Server, make_collection

from pier.db import Store
from pier.record import utcnow

pytestmark = pytest.mark.integration

SCRIPT = "echo tick > {{results_dir}}/tick.txt"
YEARLY = "0 0 1 1 *"  # no tick of its own comes during the test: only the ones it makes due fire
FIRED = "fired run"


@pytest.fixture
def pair(new_db, tmp_path, docker_backend, base_image) -> Iterator[list[Server]]:
    home = tmp_path / "home"
    home.mkdir()
    settings = {"PIER_ROUTINE_POLL_SEC": "0.1", "PIER_MAX_CONCURRENT_RUNS": "2"}
    db_url = new_db()
    servers = [Server(home=home, db_url=db_url, settings=settings) for _ in range(2)]
    for server in servers:  # one after the other: the second's start-up recovery finds no run
        server.start()
    yield servers
    for server in servers:
        server.stop()


def eventually(check: Callable[[], Any], what: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"after {timeout}s: {what}"
        time.sleep(0.2)
    return result


def runs_of(collection: Collection, name: str) -> list[dict]:
    with collection.client() as c:
        r = c.get(f"/api/v1/routines/{collection.name}/tick/{name}/runs")
    assert r.status_code == 200, r.text
    return r.json()["trajectories"]


def make_due(db_url: str, routine_ids: list[int]) -> None:
    """As if each routine's tick came an hour ago."""
    with Store.open(db_url) as store:
        for routine_id in routine_ids:
            store.update_routine(routine_id, next_run_at=utcnow() - timedelta(hours=1))


def fired_lines(servers: list[Server]) -> int:
    return sum(s.log_path.read_text(errors="replace").count(FIRED) for s in servers)


def test_two_servers_fire_each_tick_once_and_routines_survive_a_restart(pair: list[Server], base_image):
    first, second = pair
    collection = make_collection(first, base_image, prefix="routines")
    collection.put_task("tick", SCRIPT)
    names = [f"r{i}" for i in range(6)]
    ids: dict[str, int] = {}
    with collection.client() as c:
        for name in names:
            r = c.post(
                f"/api/v1/routines/{collection.name}/tick", json={"name": name, "cron_expression": YEARLY}
            )
            assert r.status_code == 201, r.text
            ids[name] = r.json()["id"]

    make_due(first.db_url, list(ids.values()))  # both servers race for all six ticks
    for name in names:
        eventually(lambda name=name: runs_of(collection, name), f"routine {name} did not fire")
    for name in names:
        (run,) = runs_of(collection, name)
        assert run["triggered_by_routine_id"] == ids[name]
        assert collection.wait("tick", run["trajectory_id"])["status"] == "completed"
    with collection.client() as c:
        listed = c.get(f"/api/v1/routines/{collection.name}").json()
    assert all(r["next_run_at"] > utcnow().isoformat() for r in listed), "a fired tick was not moved on"
    assert fired_lines(pair) == len(names)

    for server in pair:
        server.stop()
    make_due(first.db_url, [ids["r0"]])  # a tick comes while no server runs
    for server in pair:
        server.start()
    with second.client(collection.token) as c:
        assert [r["name"] for r in c.get(f"/api/v1/routines/{collection.name}").json()] == names
    runs = eventually(
        lambda: len(runs_of(collection, "r0")) == 2 and runs_of(collection, "r0"), "no run after restart"
    )
    assert collection.wait("tick", runs[0]["trajectory_id"])["status"] == "completed"
    assert {name: len(runs_of(collection, name)) for name in names} == {"r0": 2} | dict.fromkeys(names[1:], 1)
    assert fired_lines(pair) == 1  # the restarted servers log to new files: one tick fired
