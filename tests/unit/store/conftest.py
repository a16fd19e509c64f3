"""Every store test runs on SQLite, and on PostgreSQL when PIER_TEST_POSTGRES_URL
is set (scripts/start-postgres.sh prints it). Each PostgreSQL test gets its own
empty schema, so tests never see each other's rows and migrations run fresh."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pier.store import Store
from pier.store.engine import scratch_schema

POSTGRES_ENV = "PIER_TEST_POSTGRES_URL"
SKIP_REASON = f"{POSTGRES_ENV} is not set: run scripts/start-postgres.sh and export the URL it prints"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'pier.db'}"
        return
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(SKIP_REASON)
    yield from scratch_schema(base, prefix="pier_test")


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with Store.open(store_url) as opened:
        yield opened
