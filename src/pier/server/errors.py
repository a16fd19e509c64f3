"""How a service refuses, knowing no HTTP: a `ServiceError` carries the status
number the API answers it with (a page shows the same) and what to do; an
`Invalid` is a 422 whose `errors` name each bad field as pydantic does
(`{"loc": (...), "msg": ..., "type": ...}`), plain data. `pier.api.errors`
turns both into the API's JSON bodies; the web UI's pages show them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ServiceError(Exception):
    """A refusal with its status (403, 404, 409, 422, ...) and a message that says what to do."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers


class Invalid(ServiceError):
    """A 422 naming its fields: `errors` as pydantic's (each names its field by `loc`)."""

    def __init__(self, errors: Sequence[Any]):
        self._errors = list(errors)
        super().__init__(422, "; ".join(str(e.get("msg", "invalid")) for e in self._errors) or "invalid")

    def errors(self) -> list[Any]:
        return self._errors


def invalid(field: str, message: str) -> Invalid:
    """A 422 naming one field, as FastAPI's own body checks answer."""
    return Invalid([{"loc": (field,), "msg": message, "type": "value_error"}])


def invalid_fields(errors: Any) -> Invalid:
    """A 422 of pydantic's errors (each naming its field by `loc`)."""
    return Invalid(errors)


def field_errors(errors: Any, skip: tuple[str, ...] = ("body",)) -> list[dict[str, str]]:
    """[{field, message}] from pydantic's errors; `field` is a dotted path."""
    result = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ()) if part not in skip]
        result.append({"field": ".".join(loc) or "body", "message": error.get("msg", "invalid")})
    return result
