"""Files in: uploads before a run. Files out: any stored file of the caller's collection."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from pier.api.auth import Caller, CallerDep
from pier.api.errors import ApiError
from pier.api.forms import MAX_FILES, invalid
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.schemas.files import UploadResult, upload_schema
from pier.api.state import StateDep
from pier.lifecycle.assets import AssetLimits
from pier.lifecycle.files import resolve_api_path, save_checked_uploads
from pier.storage.files import attachment, content_type

CHUNK = 1 << 20
router = APIRouter(prefix="/api/v1", tags=["files"], responses=ERROR_RESPONSES)

# A stored file is what an agent made: a browser opening one (the web UI signs
# in with a cookie) must not run it as this site's page, nor guess its type.
FILE_HEADERS = {"Content-Security-Policy": "sandbox", "X-Content-Type-Options": "nosniff"}

UPLOAD_BODY = {
    "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": upload_schema()}}}
}


def _collection(caller: Caller, collection: str | None) -> str:
    """The collection a request acts on: the token's own, or (admin) the one named."""
    if collection is None:
        if caller.collection is None:
            raise invalid("collection", "the admin token must name a collection: add ?collection=NAME")
        return caller.collection
    return caller.check(collection)


@router.post("/sandbox/upload", openapi_extra=UPLOAD_BODY, summary="Upload files for later runs")
async def upload(
    request: Request,
    state: StateDep,
    caller: CallerDep,
    collection: Annotated[str | None, Query(description="for the admin token: whose upload")] = None,
) -> UploadResult:
    """Stores the `files` parts; pass the returned file_paths in a run's
    init_params.file_paths."""
    name = _collection(caller, collection)
    if caller.admin:
        await run_in_threadpool(state.store.get_collection, name)
    content_type_ = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type_ != "multipart/form-data":
        raise ApiError(415, "send the files as multipart/form-data, one `files` part each")
    form = await request.form(max_files=MAX_FILES)
    files = [v for k, v in form.multi_items() if k == "files" and isinstance(v, UploadFile)]
    if not files:
        raise invalid("files", "no file was sent: add one or more `files` parts")
    await run_in_threadpool(state.quotas.check_upload, name, sum(f.size or 0 for f in files))
    streams = [(f.filename, f.file) for f in files]
    limits = AssetLimits.of(state.settings)
    upload_id, paths = await run_in_threadpool(
        save_checked_uploads, state.storage, name, streams, limits, state.settings.scratch_root
    )
    state.quotas.uploaded(name)
    return UploadResult(upload_id=upload_id, file_paths=paths, count=len(paths))


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
    collection = path.lstrip("/").split("/", 1)[0]
    if not caller.may_use(collection):
        collection = caller.collection or ""  # look in the caller's own: not found there
    storage = state.storage
    found = resolve_api_path(storage, collection, path)
    name = PurePosixPath(found.key).name
    local = storage.local_path(found.key)
    if local is not None:
        return FileResponse(local, media_type=content_type(local), filename=name, headers=FILE_HEADERS)
    presign = state.settings.storage_presign_sec
    url = storage.presigned_url(found.key, presign) if presign else None
    if url is not None:
        return RedirectResponse(url, status_code=307)
    body = storage.open(found.key)
    return StreamingResponse(
        iter(lambda: body.read(CHUNK), b""),
        media_type=content_type(PurePosixPath(name)),
        headers={"Content-Length": str(found.size), "Content-Disposition": attachment(name), **FILE_HEADERS},
        background=BackgroundTask(body.close),
    )
