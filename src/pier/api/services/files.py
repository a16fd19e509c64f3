"""Files in (uploads for later runs) and out (any stored file of the caller's
collection)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from pier.api.auth import Caller
from pier.api.errors import invalid
from pier.api.services.runs import Upload
from pier.api.state import ApiState
from pier.lifecycle.assets import AssetLimits
from pier.lifecycle.files import resolve_api_path, save_checked_uploads


def upload_collection(state: ApiState, caller: Caller, collection: str | None) -> str:
    """The collection an upload goes to: the token's own, or (the admin's) the
    one named, which must exist."""
    if collection is None:
        if caller.collection is None:
            raise invalid("collection", "the admin token must name a collection: add ?collection=NAME")
        return caller.collection
    name = caller.check(collection)
    if caller.admin:
        state.store.get_collection(name)
    return name


def upload(state: ApiState, collection: str, uploads: Sequence[Upload]) -> tuple[str, list[str]]:
    """Stores the files, checked as a run's attachments are, under the
    collection's upload quota: (upload_id, the file_paths a run names them by)."""
    if not uploads:
        raise invalid("files", "no file was sent: add one or more `files` parts")
    state.quotas.check_upload(collection, sum(f.size or 0 for f in uploads))
    streams = [(f.filename, f.file) for f in uploads]
    limits = AssetLimits.of(state.settings)
    upload_id, paths = save_checked_uploads(
        state.storage, collection, streams, limits, state.settings.scratch_root
    )
    state.quotas.uploaded(collection)
    return upload_id, paths


@dataclass(frozen=True)
class StoredFile:
    """Where a stored file's bytes are: a local path, else a short-lived URL of
    the object itself (PIER_STORAGE_PRESIGN_SEC), else an open stream."""

    name: str
    size: int
    path: Path | None = None
    url: str | None = None
    stream: BinaryIO | None = None


def stored_file(state: ApiState, caller: Caller, path: str) -> StoredFile:
    """The file `path` (`<collection>/...`, as runs and uploads report it)
    names: only the caller's collection is searched, nothing outside it is read,
    and another collection's file is 'not found'."""
    collection = path.lstrip("/").split("/", 1)[0]
    if not caller.may_use(collection):
        collection = caller.collection or ""  # look in the caller's own: not found there
    storage = state.storage
    found = resolve_api_path(storage, collection, path)
    name = PurePosixPath(found.key).name
    local = storage.local_path(found.key)
    if local is not None:
        return StoredFile(name, found.size, path=local)
    presign = state.settings.storage_presign_sec
    url = storage.presigned_url(found.key, presign) if presign else None
    if url is not None:
        return StoredFile(name, found.size, url=url)
    return StoredFile(name, found.size, stream=storage.open(found.key))
