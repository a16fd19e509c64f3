"""API tests: a real `pier serve` per store backend (SQLite, then PostgreSQL), on
the real Docker engine with the local base image. Every collection is unique,
so tests never see each other's runs or sandboxes."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from tests.support.api_server import (
    SLOTS,
    STORAGES,
    UPLOAD_LIMIT,
    Collection,
    Server,
    make_collection,
    postgres_schema,
    storage_settings,
)

SERVER_SETTINGS = {
    "PIER_MAX_CONCURRENT_RUNS": str(SLOTS),
    "PIER_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT),
    "PIER_WEBHOOK_BACKOFF_SEC": "0.2",
    "PIER_ROUTINE_POLL_SEC": "0.5",
    "PIER_OUTBOUND_ALLOW": "127.0.0.1",  # the tests' webhook receivers listen there
}


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
        home=tmp_path_factory.mktemp("pier-serve"), db_url=new_db(), settings=SERVER_SETTINGS
    ).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session", params=STORAGES)
def storage_server(request, server, new_db, tmp_path_factory) -> Iterator[Server]:
    """The session's server (outputs in its local folder), then one whose outputs
    and uploads live in S3: the tests of what is stored and served run on both."""
    if request.param == "local":
        yield server
        return
    settings = {**SERVER_SETTINGS, **storage_settings(request.param)}
    srv = Server(home=tmp_path_factory.mktemp("pier-serve-s3"), db_url=new_db(), settings=settings).start()
    yield srv
    srv.stop()


@pytest.fixture
def collection(server: Server, base_image: str) -> Collection:
    return make_collection(server, base_image)


@pytest.fixture
def stored_collection(storage_server: Server, base_image: str) -> Collection:
    """A collection of storage_server: its runs' files are on each storage in turn."""
    return make_collection(storage_server, base_image)
