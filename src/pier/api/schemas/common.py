"""What every error and the health check answer."""

from __future__ import annotations

from pydantic import BaseModel


class FieldError(BaseModel):
    field: str
    message: str


class ErrorBody(BaseModel):
    detail: str
    errors: list[FieldError] | None = None


class Health(BaseModel):
    status: str
    version: str
    running: int
    pending: int


ERROR_RESPONSES: dict[int | str, dict] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in (
        (401, "no or unknown bearer token"),
        (403, "the token does not grant this collection"),
        (404, "no such collection, task, run or file"),
        (422, "the body or a parameter is invalid; `errors` names the fields"),
    )
}
