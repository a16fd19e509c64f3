"""Ingest, seen from another collection's token: whether a trajectory id is
held by someone else's run changes nothing in the answer. A token of
collection `mallory` ingesting with `victim`'s id gets what it gets with an
id nobody holds, byte for byte once the id it sent is set aside, and `victim`'s
run is untouched. Over HTTP on a real app with a SQLite store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pier.api.app import create_app
from pier.settings import Settings

ADMIN = "admin-" + "i" * 40


@pytest.fixture
def app(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        home=tmp_path / "home",
        database_url=None,
        docker_host=f"unix://{tmp_path / 'no-engine.sock'}",
        sweep_interval_sec=3600,
        admin_token=ADMIN,
    )
    with TestClient(create_app(settings)) as c:
        yield c


def collection(app: TestClient, name: str) -> dict[str, str]:
    made = app.post("/api/v1/collections", json={"name": name}, headers={"Authorization": f"Bearer {ADMIN}"})
    assert made.status_code == 201, made.text
    return {"Authorization": f"Bearer {made.json()['token']}"}


def ingest(app: TestClient, who: dict[str, str], c: str, **body: object):
    return app.post(f"/api/v1/trajectories/{c}/evals/ingest", json=body, headers=who)


def without(text: str, trajectory_id: str) -> str:
    return text.replace(trajectory_id, "<the id sent>")


def test_someone_elses_chosen_id_is_answered_like_an_unknown_one(app: TestClient):
    victim, mallory = collection(app, "victim"), collection(app, "mallory")
    held = ingest(
        app, victim, "victim", trajectory_id="eval-2026-q3", output={"secret": 1}, scores={"acc": 0.9}
    )
    assert held.status_code == 200, held.text
    fresh = f"eval-{uuid.uuid4().hex[:8]}"

    taken = ingest(app, mallory, "mallory", trajectory_id="eval-2026-q3")
    unknown = ingest(app, mallory, "mallory", trajectory_id=fresh)
    assert (taken.status_code, without(taken.text, "eval-2026-q3")) == (
        unknown.status_code,
        without(unknown.text, fresh),
    )
    assert taken.status_code == 200 and taken.json()["trajectory_id"] == "eval-2026-q3"
    # and what follows: each is mallory's own run, found and labelled alike
    for tid in ("eval-2026-q3", fresh):
        got = app.get(f"/api/v1/db/trajectory/mallory/evals/{tid}", headers=mallory)
        assert got.status_code == 200 and got.json()["collection"] == "mallory", got.text
        labelled = app.post(
            f"/api/v1/trajectory/mallory/evals/{tid}/labels", json={"key": "k"}, headers=mallory
        )
        assert labelled.status_code == 200 and [lb["key"] for lb in labelled.json()["labels"]] == ["k"]
        logs = app.get(f"/api/v1/workflows-logs/{tid}", headers=mallory)
        assert logs.status_code == 200 and logs.json()["workflow_id"] == f"mallory-evals--{tid}", logs.text

    kept = app.get("/api/v1/db/trajectory/victim/evals/eval-2026-q3", headers=victim).json()
    assert kept["steps"]["run"]["outputs"]["output"] == {"secret": 1}
    assert [(lb["key"], lb["value"]) for lb in kept["labels"]] == [("score.acc", "0.9")]
    logs = app.get("/api/v1/workflows-logs/victim-evals--eval-2026-q3", headers=victim)
    assert logs.status_code == 200 and logs.json()["workflow_id"] == "victim-evals--eval-2026-q3"
    both = app.get(
        "/api/v1/workflows-logs/victim-evals--eval-2026-q3", headers={"Authorization": f"Bearer {ADMIN}"}
    )
    assert both.status_code == 200 and both.json()["workflow_id"] == "victim-evals--eval-2026-q3"


def test_an_id_pier_made_for_someone_else_is_answered_like_an_unknown_one(app: TestClient):
    victim, mallory = collection(app, "victim"), collection(app, "mallory")
    held = ingest(app, victim, "victim", output={"secret": 1})  # pier chooses its id
    assert held.status_code == 200, held.text
    theirs, nobodys = held.json()["trajectory_id"], uuid.uuid4().hex

    taken = ingest(app, mallory, "mallory", trajectory_id=theirs)
    unknown = ingest(app, mallory, "mallory", trajectory_id=nobodys)
    assert (taken.status_code, without(taken.text, theirs)) == (
        unknown.status_code,
        without(unknown.text, nobodys),
    )
    assert taken.status_code == 422 and "the form of the ids pier makes" in taken.json()["detail"]
    mine = ingest(app, mallory, "mallory")
    again = ingest(app, mallory, "mallory", trajectory_id=mine.json()["trajectory_id"], output=2)
    assert again.status_code == 200 and again.json()["trajectory_id"] == mine.json()["trajectory_id"]
    kept = app.get(f"/api/v1/db/trajectory/victim/evals/{theirs}", headers=victim).json()
    assert kept["steps"]["run"]["outputs"]["output"] == {"secret": 1}
