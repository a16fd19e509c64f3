"""Fault tests: each module starts the services it breaks once (a PostgreSQL
cluster, a Temporal dev server, an S3 server of its own, tests/support/private.py),
and each test a fleet on them (a `pier serve`, `pier worker`s, the fake
sandbox backend), a fresh database schema per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, make_url, text
from tests.support.fleet import Fleet
from tests.support.private import Postgres, Temporal


@pytest.fixture(scope="module")
def private_pg() -> Iterator[Postgres]:
    pg = Postgres.create()
    try:
        yield pg
    finally:
        pg.destroy()


@pytest.fixture(scope="module")
def private_temporal() -> Iterator[Temporal]:
    temporal = Temporal.create()
    try:
        yield temporal
    finally:
        temporal.destroy()


@pytest.fixture
def fault_fleet(tmp_path, private_pg: Postgres, private_temporal: Temporal) -> Iterator[Fleet]:
    """A fleet on this module's own PostgreSQL and Temporal (a test may stop either)."""
    private_temporal.start_if_stopped()
    with fresh_schema(private_pg, "pier_faults") as db_url:
        fleet = Fleet(home=tmp_path / "home", db_url=db_url, address=private_temporal.address)
        fleet.home.mkdir()
        try:
            yield fleet
        finally:
            fleet.close()


@contextmanager
def fresh_schema(pg: Postgres, prefix: str) -> Iterator[str]:
    """The URL of a new schema on `pg` (started if a test stopped it), dropped after."""
    pg.start_if_stopped()
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    _admin(pg, f'CREATE SCHEMA "{schema}"')
    url = make_url(pg.url).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        pg.start_if_stopped()
        _admin(pg, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _admin(pg: Postgres, statement: str) -> None:
    """On a connection of its own: the server may have restarted since the last."""
    engine = create_engine(pg.url)
    try:
        with engine.begin() as connection:
            connection.execute(text(statement))
    finally:
        engine.dispose()
