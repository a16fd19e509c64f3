"""API tests: a real `pier serve` per store backend (SQLite, then PostgreSQL), on
the real Docker engine with the local base image. Every collection is unique,
so tests never see each other's runs or sandboxes."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from pier.record import RunStatus
from pier.sandbox.base import LABEL_COLLECTION
from tests.integration.api.server import ADMIN_TOKEN, Server, runbook

POSTGRES_ENV = "PIER_TEST_POSTGRES_URL"
UPLOAD_LIMIT = 1024 * 1024
SLOTS = 4


def postgres_base_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        reason = f"{POSTGRES_ENV} is not set: run scripts/start-postgres.sh and export the URL it prints"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI must run the API suite on PostgreSQL)", pytrace=False)
        pytest.skip(reason)
    return url


def postgres_schema() -> Iterator[str]:
    """A fresh schema for one server's store, dropped afterwards."""
    base = postgres_base_url()
    schema = f"pier_api_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield (
            make_url(base)
            .update_query_dict({"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def db_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="session")
def new_db(db_backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], str]]:
    """Makes empty stores of the session's backend."""
    schemas: list[Iterator[str]] = []

    def make() -> str:
        if db_backend == "sqlite":
            return f"sqlite:///{tmp_path_factory.mktemp('db') / 'pier.db'}"
        schema = postgres_schema()
        schemas.append(schema)
        return next(schema)

    yield make
    for schema in schemas:
        next(schema, None)


@pytest.fixture(scope="session")
def server(new_db, tmp_path_factory, docker_backend, base_image) -> Iterator[Server]:
    srv = Server(
        home=tmp_path_factory.mktemp("pier-serve"),
        db_url=new_db(),
        settings={
            "PIER_MAX_CONCURRENT_RUNS": str(SLOTS),
            "PIER_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT),
            "PIER_WEBHOOK_BACKOFF_SEC": "0.2",
        },
    ).start()
    yield srv
    srv.stop()


def ended(record: dict) -> bool:
    return RunStatus(record["status"]).terminal


@dataclass
class Collection:
    name: str
    token: str
    server: Server
    image: str

    def client(self, token: str | None = None) -> httpx.Client:
        return self.server.client(token or self.token)

    def put_task(self, task: str, script: str, **front: object) -> None:
        front.setdefault("snapshot", "")
        front.setdefault("image", self.image)
        with self.client() as c:
            r = c.put(f"/api/v1/tasks/{self.name}/{task}", content=runbook(script, **front),
                      headers={"Content-Type": "text/markdown"})  # fmt: skip
        assert r.status_code == 200, r.text

    def run(self, task: str, **body: object) -> str:
        with self.client() as c:
            r = c.post(f"/api/v1/run/{self.name}/{task}", json=body)
        assert r.status_code == 200, r.text
        return r.json()["trajectory_id"]

    def record(self, task: str, trajectory_id: str) -> dict:
        with self.client() as c:
            r = c.get(f"/api/v1/db/trajectory/{self.name}/{task}/{trajectory_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def wait(
        self, task: str, trajectory_id: str, timeout: float = 120, done: Callable[[dict], bool] = ended
    ) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            record = self.record(task, trajectory_id)
            if done(record):
                return record
            assert time.monotonic() < deadline, f"run still {record['status']} after {timeout}s"
            time.sleep(0.2)

    def sandboxes(self, backend) -> list:
        return [s for s in backend.list_sandboxes() if s.labels.get(LABEL_COLLECTION) == self.name]


def make_collection(server: Server, image: str, prefix: str = "api") -> Collection:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    with server.client(ADMIN_TOKEN) as c:
        r = c.post("/api/v1/collections", json={"name": name})
    assert r.status_code == 201, r.text
    return Collection(name=name, token=r.json()["token"], server=server, image=image)


@pytest.fixture
def collection(server: Server, base_image: str) -> Collection:
    return make_collection(server, base_image)
