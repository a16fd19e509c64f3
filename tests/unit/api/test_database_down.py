"""A request the database cannot answer is the database's 503 with
Retry-After, whatever it came wrapped in; a driver error that is not about
reaching the database stays an internal error. (On a real PostgreSQL stopped:
tests/integration/faults/test_database_down_api.py.)"""

from __future__ import annotations

import psycopg
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.exc import IntegrityError, OperationalError

from pier.api import errors
from pier.db.retry import unreachable
from pier.errors import PierError


def refused() -> OperationalError:
    return OperationalError("SELECT 1", {}, Exception("connection refused"))


def wrapped() -> PierError:
    try:
        raise refused()
    except OperationalError as exc:
        try:
            raise PierError("could not read the run") from exc
        except PierError as outer:
            return outer


RAISES = {
    "sqlalchemy": refused,
    "psycopg": lambda: psycopg.OperationalError("server closed the connection unexpectedly"),
    "wrapped": wrapped,
    "group": lambda: ExceptionGroup("tasks", [ValueError("x"), refused()]),
    "runtime": lambda: RuntimeError("stream broke"),
}


def make_app() -> FastAPI:
    app = FastAPI()
    errors.install(app)

    @app.get("/raise/{kind}")
    def boom(kind: str) -> None:
        if kind == "integrity":
            raise IntegrityError("INSERT", {}, Exception("duplicate key"))
        raise RAISES[kind]()

    return app


@pytest.mark.parametrize("kind", ["sqlalchemy", "psycopg", "wrapped", "group"])
def test_the_database_unreachable_is_a_503_with_retry_after(kind: str) -> None:
    with TestClient(make_app(), raise_server_exceptions=False) as client:
        r = client.get(f"/raise/{kind}")
    assert r.status_code == 503, r.text
    assert int(r.headers["Retry-After"]) > 0
    assert "database is unreachable" in r.json()["detail"]
    assert "connection refused" not in r.text, "the driver's words go to the log, not to the client"


@pytest.mark.parametrize("kind", ["integrity", "runtime"])
def test_other_errors_stay_internal(kind: str) -> None:
    with TestClient(make_app(), raise_server_exceptions=False) as client:
        r = client.get(f"/raise/{kind}")
    assert r.status_code == 500, r.text
    assert "Retry-After" not in r.headers


def raised_while_handling(hide: bool) -> Exception:
    try:
        try:
            raise refused()
        except OperationalError:
            if hide:
                raise KeyError("translated on purpose") from None
            raise KeyError("cleanup failed too")  # noqa: B904 - the implicit context is the point
    except KeyError as exc:
        return exc
    raise AssertionError("unreachable")


def test_unreachable_follows_what_an_error_was_raised_while_handling_unless_hidden() -> None:
    assert isinstance(unreachable(raised_while_handling(hide=False)), OperationalError)
    assert unreachable(raised_while_handling(hide=True)) is None
    assert unreachable(ValueError("x")) is None
