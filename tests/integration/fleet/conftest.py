"""Fleet tests: Temporal's dev server, PostgreSQL, one `pier serve` with
PIER_EXECUTOR=temporal and `pier worker` processes started by each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.support.api_server import postgres_schema
from tests.support.fleet import Fleet, temporal_address


@pytest.fixture
def fleet(tmp_path) -> Iterator[Fleet]:
    address = temporal_address()
    schema = postgres_schema()
    fleet = Fleet(home=tmp_path / "home", db_url=next(schema), address=address)
    fleet.home.mkdir()
    try:
        yield fleet
    finally:
        fleet.close()
        next(schema, None)
