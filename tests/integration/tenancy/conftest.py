"""Tenancy tests: a real `pier serve` on the fake sandbox backend (the engine is
not the point here), SQLite store, short HTTP timeouts so slow clients show
within seconds; collections made per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.api_server import Server
from tests.support.fleet import FAKE_BACKEND

SERVER_SETTINGS = {
    "PIER_SANDBOX_BACKEND": FAKE_BACKEND,
    "PIER_HTTP_HEADER_TIMEOUT_SEC": "1",
    "PIER_HTTP_BODY_IDLE_SEC": "1",
    "PIER_WEBHOOK_BACKOFF_SEC": "0.2",
}


def start_server(home: Path, **settings: str) -> Server:
    return Server(
        home=home, db_url=f"sqlite:///{home / 'pier.db'}", settings={**SERVER_SETTINGS, **settings}
    ).start()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("tenancy"))
    yield srv
    srv.stop()
