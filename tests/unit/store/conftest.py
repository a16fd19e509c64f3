"""Every store test runs on SQLite and on PostgreSQL ($PIER_TEST_POSTGRES_URL,
which scripts/start-postgres.sh prints; without it the PostgreSQL half skips, or
fails under CI=true). Each PostgreSQL test gets its own empty schema, so tests
never see each other's rows and migrations run fresh."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.services import postgres_url

from pier.store import Store
from pier.store.engine import scratch_schema


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'pier.db'}"
        return
    yield from scratch_schema(postgres_url(), prefix="pier_test")


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with Store.open(store_url) as opened:
        yield opened
