"""Upload bodies."""

from __future__ import annotations

from pydantic import BaseModel, Field


class UploadResult(BaseModel):
    upload_id: str
    file_paths: list[str] = Field(description="put these in a run's init_params.file_paths")
    count: int


def upload_schema() -> dict:
    return {
        "type": "object",
        "required": ["files"],
        "properties": {"files": {"type": "array", "items": {"type": "string", "format": "binary"}}},
    }
