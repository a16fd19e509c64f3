"""Files uploaded before a run (POST /sandbox/upload) are kept PIER_UPLOAD_TTL_SEC,
then the server's periodic sweep deletes them, so uploads nobody used do not
fill the disk. An upload that a run which has not ended names is kept: that run
copies it into its sandbox when it starts (and keeps its own copy with its
outputs)."""

from __future__ import annotations

import logging
import re
import time

from pier.db import Store
from pier.errors import InputError, NotFoundError
from pier.storage.base import UPLOADS, RunStorage, StoredFile, upload_prefix

log = logging.getLogger(__name__)

# An upload's API path: <collection>/.uploads/<upload id>/<file name>
UPLOAD_PATH = re.compile(rf"^/?(?P<collection>[^/]+)/{re.escape(UPLOADS)}/(?P<upload_id>[0-9a-f]{{32}})/")


# An OpenAI-style file id (POST /api/v1/files): an upload of one file.
FILE_ID = re.compile(r"^file-(?P<upload_id>[0-9a-f]{32})$")


def file_id(upload_id: str) -> str:
    return f"file-{upload_id}"


def file_of_id(storage: RunStorage, collection: str, name: str) -> StoredFile:
    """The stored file an OpenAI-style id names in `collection`; NotFoundError
    when it is not one of the collection's (another's, expired or made up)."""
    match = FILE_ID.match(name)
    found = list(storage.files(upload_prefix(collection, match["upload_id"]))) if match else []
    if len(found) != 1:
        raise NotFoundError(
            f"file {name!r} not found in collection {collection!r}: upload it with POST /api/v1/files "
            "(ids live as long as uploads, PIER_UPLOAD_TTL_SEC)"
        )
    return found[0]


def refuse_file_ids(paths: object, field: str = "init_params.file_paths") -> None:
    """A file id where storage paths go is refused, saying where ids go (the
    platform drops such an entry silently and the run goes on without the file)."""
    for path in paths if isinstance(paths, list) else []:
        if isinstance(path, str) and FILE_ID.match(path):
            raise InputError(
                f"{field}: {path!r} is a file id from POST /api/v1/files, not a storage path: pass ids in "
                "jetty.files (chat completions) or init_params.files, and storage paths from "
                "POST /api/v1/sandbox/upload in file_paths"
            )


def upload_of(path: str) -> tuple[str, str] | None:
    """(collection, upload id) when `path` names a file of an upload, else None."""
    match = UPLOAD_PATH.match(path)
    return (match["collection"], match["upload_id"]) if match else None


def uploads_in_use(store: Store) -> set[tuple[str, str]]:
    """The uploads that runs which have not ended name (their kept requests)."""
    used = set()
    for request in store.run_requests().values():
        params = request.get("run_params") or {}
        task_params = (request.get("task") or {}).get("init_params") or {}
        for path in [*(params.get("file_paths") or []), *(task_params.get("file_paths") or [])]:
            found = upload_of(str(path))
            if found:
                used.add(found)
    return used


def expire_uploads(storage: RunStorage, store: Store, ttl_sec: float, now: float | None = None) -> int:
    """Delete uploads older than ttl_sec that no pending or running run names;
    how many were deleted."""
    now = time.time() if now is None else now
    used = uploads_in_use(store)
    removed = 0
    for upload in storage.uploads():
        if now - upload.changed < ttl_sec or (upload.collection, upload.upload_id) in used:
            continue
        storage.delete(upload_prefix(upload.collection, upload.upload_id))
        removed += 1
        log.info("deleted upload %s of %s: unused for %.0fs", upload.upload_id, upload.collection, ttl_sec)
    return removed


def expired_message(path: str, ttl_sec: float) -> str | None:
    """What to tell a caller whose run names a missing upload file, else None."""
    found = upload_of(path)
    if found is None:
        return None
    return (
        f"init_params.file_paths: {path!r} is not there: upload {found[1]} has expired (uploads are "
        f"kept {ttl_sec:.0f}s, PIER_UPLOAD_TTL_SEC) or never held that file: upload it again with "
        "POST /api/v1/sandbox/upload and pass a file path it returns"
    )
