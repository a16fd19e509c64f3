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


class FilePublic(BaseModel):
    """An OpenAI-style file object."""

    id: str = Field(description="file-<32 hex>: pass it in jetty.files or init_params.files, not file_paths")
    object: str = "file"
    bytes: int
    created_at: int = Field(description="Unix time of its upload")
    filename: str
    purpose: str
    status: str = "processed"
    path: str = Field(description="its storage path (what file_paths would take)")


class FileList(BaseModel):
    object: str = "list"
    data: list[FilePublic]


class FileDeleted(BaseModel):
    id: str
    object: str = "file"
    deleted: bool = True


def file_upload_schema() -> dict:
    return {
        "type": "object",
        "required": ["file"],
        "properties": {
            "file": {"type": "string", "format": "binary"},
            "purpose": {"type": "string", "description": "kept and shown; any value (default user_data)"},
        },
    }
