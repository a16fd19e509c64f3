"""What every error and the health check answer."""

from __future__ import annotations

from typing import Any

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


def inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """model's JSON schema with its `$defs` written in place, for a body schema
    given by hand (a route's openapi_extra): pydantic's `#/$defs/...` pointers
    mean nothing once the schema sits inside the OpenAPI document, and ReDoc
    stops at the first ("Invalid reference token: $defs"). Models whose
    schemas refer to themselves are not inlined (none is given here)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def place(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return place(
                    {**defs[ref.removeprefix("#/$defs/")], **{k: v for k, v in node.items() if k != "$ref"}}
                )
            return {key: place(value) for key, value in node.items()}
        if isinstance(node, list):
            return [place(item) for item in node]
        return node

    return place(schema)
