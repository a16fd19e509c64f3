"""Files in: uploads before a run. Files out: any stored file of the caller's collection."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile

from pier.api.auth import CallerDep
from pier.api.errors import ApiError
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.schemas.files import (
    FileDeleted,
    FileList,
    FilePublic,
    UploadResult,
    file_upload_schema,
    upload_schema,
)
from pier.api.state import StateDep
from pier.server.services import files as service
from pier.server.services.runs import MAX_FILES
from pier.storage.files import attachment, content_type

CHUNK = 1 << 20
router = APIRouter(prefix="/api/v1", tags=["files"], responses=ERROR_RESPONSES)

# A stored file is what an agent made: a browser opening one (the web UI signs
# in with a cookie) must not run it as this site's page, nor guess its type.
FILE_HEADERS = {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"}

UPLOAD_BODY = {
    "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": upload_schema()}}}
}


@router.post("/sandbox/upload", openapi_extra=UPLOAD_BODY, summary="Upload files for later runs")
async def upload(
    request: Request,
    state: StateDep,
    caller: CallerDep,
    collection: Annotated[str | None, Query(description="for the admin token: whose upload")] = None,
) -> UploadResult:
    """Stores the `files` parts; pass the returned file_paths in a run's
    init_params.file_paths."""
    name = await run_in_threadpool(service.upload_collection, state, caller, collection)
    form = await _multipart(
        request, "send the files as multipart/form-data, one `files` part each", MAX_FILES
    )
    files = [v for k, v in form.multi_items() if k == "files" and isinstance(v, UploadFile)]
    upload_id, paths = await run_in_threadpool(service.upload, state, name, files)
    return UploadResult(upload_id=upload_id, file_paths=paths, count=len(paths))


async def _multipart(request: Request, refusal: str, max_files: int) -> FormData:
    """The request's multipart form; a 415 saying `refusal` for any other body."""
    content_type_ = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type_ != "multipart/form-data":
        raise ApiError(415, refusal)
    return await request.form(max_files=max_files)


FILE_BODY = {
    "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": file_upload_schema()}}}
}


def _public(found: service.OpenAIFile) -> FilePublic:
    return FilePublic(id=found.id, bytes=found.bytes, created_at=found.created_at, filename=found.filename,
                      purpose=found.purpose, path=found.key)  # fmt: skip


@router.post("/files", openapi_extra=FILE_BODY, summary="Upload a file (OpenAI-style)")
async def upload_file(
    request: Request,
    state: StateDep,
    caller: CallerDep,
    collection: Annotated[str | None, Query(description="for the admin token: whose file")] = None,
) -> FilePublic:
    """Stores the `file` part as an upload of its own and answers an
    OpenAI-style file object: pass its `id` in a chat completion's jetty.files
    (or a run's init_params.files); file_paths take storage paths instead."""
    name = await run_in_threadpool(service.upload_collection, state, caller, collection)
    form = await _multipart(request, "send the file as multipart/form-data, in a `file` part", 1)
    files = [v for k, v in form.multi_items() if k == "file" and isinstance(v, UploadFile)]
    if len(files) != 1:
        raise ApiError(
            422, "send exactly one `file` part (for several files at once: POST /api/v1/sandbox/upload)"
        )
    purpose = form.get("purpose")
    found = await run_in_threadpool(
        service.upload_one, state, name, files[0], purpose if isinstance(purpose, str) else "user_data"
    )
    return _public(found)


@router.get("/files", summary="The collection's files (OpenAI-style)")
def list_files(
    state: StateDep,
    caller: CallerDep,
    collection: Annotated[str | None, Query(description="for the admin token: whose files")] = None,
) -> FileList:
    name = service.upload_collection(state, caller, collection)
    return FileList(data=[_public(f) for f in service.list_files(state, name)])


@router.get("/files/{file_id}", summary="A file (OpenAI-style)")
def get_file_object(
    file_id: str,
    state: StateDep,
    caller: CallerDep,
    collection: Annotated[str | None, Query(description="for the admin token: whose file")] = None,
) -> FilePublic:
    return _public(service.open_file(state, service.upload_collection(state, caller, collection), file_id))


@router.delete("/files/{file_id}", summary="Delete a file (OpenAI-style)")
def delete_file_object(
    file_id: str,
    state: StateDep,
    caller: CallerDep,
    collection: Annotated[str | None, Query(description="for the admin token: whose file")] = None,
) -> FileDeleted:
    return FileDeleted(
        id=service.delete_file(state, service.upload_collection(state, caller, collection), file_id)
    )


@router.get(
    "/file/{path:path}",
    summary="A stored file",
    response_class=FileResponse,
    responses={200: {"content": {"application/octet-stream": {}}, "description": "the file's bytes"}},
)
def get_file(path: str, state: StateDep, caller: CallerDep) -> Response:
    """`path` is `<collection>/...` as runs and uploads report it; only the
    caller's collection is searched, and nothing outside it is read. From object
    storage the bytes are streamed through, or (PIER_STORAGE_PRESIGN_SEC) the
    answer is a redirect to a short-lived URL of the object itself."""
    found = service.stored_file(state, caller, path)
    if found.path is not None:
        return FileResponse(
            found.path, media_type=content_type(found.path), filename=found.name, headers=FILE_HEADERS
        )
    if found.url is not None:
        return RedirectResponse(found.url, status_code=307)
    body = found.stream
    assert body is not None
    return StreamingResponse(
        iter(lambda: body.read(CHUNK), b""),
        media_type=content_type(PurePosixPath(found.name)),
        headers={
            "Content-Length": str(found.size),
            "Content-Disposition": attachment(found.name),
            **FILE_HEADERS,
        },
        background=BackgroundTask(body.close),
    )
