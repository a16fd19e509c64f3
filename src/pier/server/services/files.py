"""Files in (uploads for later runs) and out (any stored file of the caller's
collection)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from pier.lifecycle.assets import AssetLimits
from pier.lifecycle.files import resolve_api_path, save_checked_uploads
from pier.lifecycle.uploads import FILE_ID, file_id, file_of_id
from pier.server.auth import Caller
from pier.server.errors import invalid
from pier.server.services.runs import Upload
from pier.server.state import ApiState
from pier.storage.base import upload_prefix


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


@dataclass(frozen=True)
class OpenAIFile:
    """A file of the OpenAI-style Files API: one upload holding one file, whose
    id (`file-<upload id>`) a run names in jetty.files or init_params.files."""

    id: str
    filename: str
    bytes: int
    created_at: int
    purpose: str
    key: str


def upload_one(state: ApiState, collection: str, item: Upload, purpose: str) -> OpenAIFile:
    """Stores one file as an upload of its own: its OpenAI-style record."""
    upload_id, _paths = upload(state, collection, [item])
    return open_file(state, collection, file_id(upload_id), purpose)


def open_file(state: ApiState, collection: str, name: str, purpose: str = "user_data") -> OpenAIFile:
    """The file `name` (an id) of `collection`; NotFoundError for another's, an
    expired one or an id that is not one."""
    found = file_of_id(state.storage, collection, name)
    match = FILE_ID.match(name)
    assert match is not None  # file_of_id found it
    changed = next(
        (u.changed for u in state.storage.uploads()
         if u.collection == collection and u.upload_id == match["upload_id"]), 0.0,
    )  # fmt: skip
    return OpenAIFile(name, PurePosixPath(found.key).name, found.size, int(changed), purpose, found.key)


def list_files(state: ApiState, collection: str) -> list[OpenAIFile]:
    """The collection's single-file uploads as files, newest first (uploads of
    several files, from /sandbox/upload, have no one id)."""
    found = []
    for upload in state.storage.uploads():
        if upload.collection != collection:
            continue
        files = list(state.storage.files(upload_prefix(collection, upload.upload_id)))
        if len(files) == 1:
            name = PurePosixPath(files[0].key).name
            found.append(OpenAIFile(file_id(upload.upload_id), name, files[0].size, int(upload.changed),
                                    "user_data", files[0].key))  # fmt: skip
    return sorted(found, key=lambda f: f.created_at, reverse=True)


def delete_file(state: ApiState, collection: str, name: str) -> str:
    found = open_file(state, collection, name)
    match = FILE_ID.match(found.id)
    assert match is not None
    state.storage.delete(upload_prefix(collection, match["upload_id"]))
    return found.id
