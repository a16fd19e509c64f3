"""Fleet tests: Temporal's dev server, PostgreSQL, one `pier serve` with
PIER_EXECUTOR=temporal and `pier worker` processes started by each test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.support.api_server import postgres_schema
from tests.support.fleet import Fleet, temporal_address


@contextmanager
def fleet_on(tmp_path: Path, address: str) -> Iterator[Fleet]:
    """A fleet on the Temporal at `address`, in a fresh database schema."""
    schema = postgres_schema()
    fleet = Fleet(home=tmp_path / "home", db_url=next(schema), address=address)
    fleet.home.mkdir()
    try:
        yield fleet
    finally:
        fleet.close()
        next(schema, None)


@pytest.fixture
def fleet(tmp_path) -> Iterator[Fleet]:
    with fleet_on(tmp_path, temporal_address()) as fleet:
        yield fleet
