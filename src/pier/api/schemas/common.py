"""What every error and the health check answer."""

from __future__ import annotations

from pydantic import BaseModel, Field


class FieldError(BaseModel):
    field: str
    message: str


class ErrorBody(BaseModel):
    detail: str
    errors: list[FieldError] | None = None


class Health(BaseModel):
    status: str = Field(description='"ok", or "degraded" when the engine or the database does not answer')
    version: str
    running: int
    pending: int
    engine: str = Field("ok", description='"ok", or why the sandbox engine does not answer')
    database: str = Field("ok", description='"ok", or why the database does not answer')


class Readiness(BaseModel):
    status: str = Field(description='"ready" (HTTP 200), or "unready" (HTTP 503)')
    engine: str = Field(description='"ok", or why the sandbox engine does not answer')
    database: str = Field(description='"ok", or why the database does not answer')
    storage: str = Field("ok", description='"ok", or why the run storage (PIER_STORAGE_URL) does not answer')
    temporal: str | None = Field(
        None, description='with PIER_EXECUTOR=temporal: "ok", or why Temporal does not answer'
    )
    draining: str | None = Field(
        None, description="while the server shuts down (it takes no new runs): why; else absent (null)"
    )


ERROR_RESPONSES: dict[int | str, dict] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in (
        (401, "no or unknown bearer token"),
        (403, "the token does not grant this collection"),
        (404, "no such collection, task, run or file"),
        (422, "the body or a parameter is invalid; `errors` names the fields"),
    )
}
