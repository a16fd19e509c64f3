"""Every store test runs on SQLite, and on PostgreSQL when PIER_TEST_POSTGRES_URL
is set (scripts/start-postgres.sh prints it). Each PostgreSQL test gets its own
empty schema, so tests never see each other's rows and migrations run fresh."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from pier.store import Store

POSTGRES_ENV = "PIER_TEST_POSTGRES_URL"
SKIP_REASON = f"{POSTGRES_ENV} is not set: run scripts/start-postgres.sh and export the URL it prints"


def _postgres_schema_url(base: str) -> Iterator[str]:
    schema = f"pier_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state' / 'pier.db'}"
        return
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(SKIP_REASON)
    yield from _postgres_schema_url(base)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with Store.open(store_url) as opened:
        yield opened
