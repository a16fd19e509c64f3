"""Every error is a JSON body `{"detail": "<what went wrong and what to do>"}`;
validation errors add `errors: [{field, message}]` naming each bad field.
A request the database could not answer (it is down, or its connection was
lost) is a 503 with Retry-After, on every route, never a 500."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from pier.db.retry import disk_full, driver_errors, unreachable
from pier.errors import (
    AssetError,
    InputError,
    NotFoundError,
    PierError,
    Problems,
    SandboxError,
    ServiceUnavailable,
)
from pier.limits import LimitError
from pier.policies.quotas import QuotaExceeded
from pier.server.errors import Invalid, ServiceError, field_errors

log = logging.getLogger(__name__)

DATABASE_RETRY_AFTER_SEC = 5  # what a client is told to wait while the database does not answer
DATABASE_DISK_FULL = (
    "the database's disk is full, so this request was not stored: the operator must free space where "
    "the database lives (GET /health/ready says when it can take writes again)"
)
DATABASE_DOWN = (
    "the database is unreachable, so this request was not completed: send it again in a few "
    "seconds (GET /health/ready says whether the database answers)"
)

# What FastAPI and Starlette say on their own, and what to do about it.
_HINTS = {
    "Not Found": "no such route: see /docs for the API",
    "Method Not Allowed": "method not allowed on this route: see /docs for the API",
    "There was an error parsing the body": "the body could not be read: send JSON as UTF-8 with "
    "Content-Type: application/json, or a well-formed multipart/form-data body",
}


class ApiError(HTTPException):
    """An HTTP error whose message says what to do."""

    def __init__(self, status_code: int, detail: str, headers: dict[str, str] | None = None):
        if status_code == 401:
            headers = {"WWW-Authenticate": "Bearer", **(headers or {})}
        super().__init__(status_code=status_code, detail=detail, headers=headers)


def body(detail: str, errors: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"detail": detail} if errors is None else {"detail": detail, "errors": errors}


def validation_response(errors: list[dict[str, str]]) -> JSONResponse:
    summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5])
    return JSONResponse(body(f"invalid request: {summary}", errors), status_code=422)


async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = field_errors(exc.errors())
    hint = _content_type_hint(request, errors)
    if hint:
        return JSONResponse(body(hint, errors), status_code=422)
    return validation_response(errors)


_READ_AS_JSON = ("application/json", "multipart/form-data")


def _content_type_hint(request: Request, errors: list[dict[str, str]]) -> str | None:
    """What to send, when a refused body was not labelled JSON (`curl -d '{...}'`
    labels it a form): the fields pydantic names then say nothing useful."""
    if request.method not in ("POST", "PUT", "PATCH"):
        return None
    sent = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if sent in _READ_AS_JSON or sent.endswith("+json"):
        return None
    as_form = sent == "application/x-www-form-urlencoded"
    if as_form and not any(e["field"] == "body" or e["field"].startswith(("{", "[")) for e in errors):
        return None  # a real form with a bad field: the field's own message says it
    return (
        f"the body was sent as {sent or 'no Content-Type'}, so it was not read as JSON: send the header "
        "`Content-Type: application/json` (curl: -H 'Content-Type: application/json'; `curl -d` alone "
        "labels the body a form)"
    )


async def _pydantic(_request: Request, exc: ValidationError) -> JSONResponse:
    return validation_response(field_errors(exc.errors(), skip=()))


async def _http(_request: Request, exc: HTTPException) -> JSONResponse:
    detail = str(exc.detail)
    if not isinstance(exc, ApiError):
        detail = _HINTS.get(detail, detail)
    return JSONResponse(body(detail), status_code=exc.status_code, headers=exc.headers)


async def _service(request: Request, exc: ServiceError) -> JSONResponse:
    """A service's refusal, answered as the API's own: an `Invalid` as a 422 of
    its fields (FastAPI's body checks' answer), else its status and message."""
    if isinstance(exc, Invalid):
        return await _validation(request, RequestValidationError(exc.errors()))
    return await _http(request, ApiError(exc.status, exc.detail, exc.headers))


async def _pier(request: Request, exc: PierError) -> JSONResponse:
    if isinstance(exc, QuotaExceeded):
        return JSONResponse(
            {**body(str(exc)), "quota": exc.quota},
            status_code=429,
            headers={"Retry-After": str(exc.retry_after)},
        )
    if isinstance(exc, LimitError):
        return validation_response([{"field": exc.field, "message": exc.message}])
    if isinstance(exc, AssetError):
        return validation_response([{"field": exc.field, "message": str(exc)}])
    if isinstance(exc, Problems):  # every problem of a run at once, each naming its key when known
        return validation_response(
            [{"field": p.key or "init_params", "message": str(p)} for p in exc.problems]
        )
    if isinstance(exc, NotFoundError):
        status = 404
    elif isinstance(exc, InputError):
        status = 422
    elif isinstance(exc, ServiceUnavailable) and exc.retry_after is not None:
        return JSONResponse(body(str(exc)), status_code=503, headers={"Retry-After": str(exc.retry_after)})
    elif isinstance(exc, SandboxError | ServiceUnavailable):
        status = 503
    elif (down := _database_down(request, exc)) is not None:
        return down
    else:
        status = 500
    return JSONResponse(body(str(exc)), status_code=status)


def _database_down(request: Request, exc: BaseException) -> JSONResponse | None:
    """503 with Retry-After when `exc` (or what it was raised from) says the
    database did not answer; the driver's words go to the log, one line."""
    cause = unreachable(exc)
    if cause is None:
        return None
    first_line = (str(cause).strip().splitlines() or [""])[0][:300]
    full = disk_full(cause)
    log.warning("database %s on %s %s (%s: %s): answered 503", "disk full" if full else "unreachable",
                request.method, request.url.path, type(cause).__name__, first_line)  # fmt: skip
    return JSONResponse(
        body(DATABASE_DISK_FULL if full else DATABASE_DOWN),
        status_code=503,
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_SEC)},
    )


async def _driver(request: Request, exc: Exception) -> JSONResponse:
    """A database driver's error: the database's 503 when it did not answer,
    else an internal error."""
    return _database_down(request, exc) or await _internal(request, exc)


async def _too_deep(_request: Request, _exc: RecursionError) -> JSONResponse:
    """Input nested past what the code reading it can follow (a runbook's YAML,
    say): the caller's to flatten, never a server error."""
    message = "nested too deeply to be read: send flatter data (JSON bodies: PIER_MAX_JSON_DEPTH levels)"
    return validation_response([{"field": "body", "message": message}])


async def _internal(request: Request, exc: Exception) -> JSONResponse:
    if (down := _database_down(request, exc)) is not None:  # wrapped in another error
        return down
    log.exception("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse(body("internal server error: see the server log, and report it"), status_code=500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(ValidationError, _pydantic)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http)  # type: ignore[arg-type]
    app.add_exception_handler(ServiceError, _service)  # type: ignore[arg-type]
    app.add_exception_handler(PierError, _pier)  # type: ignore[arg-type]
    app.add_exception_handler(RecursionError, _too_deep)  # type: ignore[arg-type]
    for driver_error in driver_errors():  # handled here, not left to the last resort, which re-raises
        app.add_exception_handler(driver_error, _driver)
    app.add_exception_handler(Exception, _internal)
