"""Files as the API names them: storage keys, `<collection>/<path inside the
collection>`, e.g. `team-a/.uploads/<upload id>/data.csv` or
`team-a/report/<run id>/results/report.md`. A key is only ever looked up inside
the caller's own collection."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from pier.errors import InputError, NotFoundError
from pier.lifecycle.assets import AssetLimits, check_assets
from pier.names import check_collection_name
from pier.storage.base import RunStorage, StoredFile, clean_key, upload_prefix

MAX_FILE_NAME = 255  # what Linux file systems take


def resolve_api_path(storage: RunStorage, collection: str, name: str) -> StoredFile:
    """The stored file an API path names, if it lies in `collection`.
    NotFoundError otherwise: another collection's file, a '..' or symlink that
    escapes, and a missing file all look the same to the caller."""
    missing = NotFoundError(f"file {name!r} not found in collection {collection!r}: check the path")
    key = clean_key(name)
    if key is None:
        raise missing
    head, _, rest = key.partition("/")
    if head != collection or not rest:
        raise missing
    try:
        check_collection_name(collection)
        return storage.stat(key)
    except (InputError, NotFoundError):  # not even a valid collection name ('..')
        raise missing from None


def upload_name(filename: str | None) -> str:
    """The name an uploaded file is stored under: its base name, without any folder."""
    name = PurePosixPath((filename or "").replace("\\", "/")).name
    if not name or name.startswith(".") or "\x00" in name or len(name.encode()) > MAX_FILE_NAME:
        raise InputError(
            f"files: {filename!r} is not a usable file name: give each file a plain name "
            f"of at most {MAX_FILE_NAME} bytes"
        )
    return name


def save_uploads(
    storage: RunStorage,
    collection: str,
    files: Iterable[tuple[str | None, BinaryIO]],
    scratch: Path,
    limits: AssetLimits | None = None,
) -> tuple[str, list[str]]:
    """Store files as a new upload; returns its id and the files' API paths. They
    are written to a scratch folder first; with `limits`, the checks a run makes
    of its attachments (zip entries, expanded size, zip bombs) run there, so a
    file no run could use is refused at once (AssetError: 422) and never stored.
    Only compressed bytes are ever written."""
    check_collection_name(collection)
    named = [(upload_name(filename), stream) for filename, stream in files]
    names = [name for name, _ in named]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InputError(f"files: two files are named {duplicates[0]!r}: rename one (names must be unique)")
    upload_id = uuid.uuid4().hex
    prefix = upload_prefix(collection, upload_id)
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="upload-") as tmp:
        folder = Path(tmp)
        for name, stream in named:
            with open(folder / name, "wb") as out:
                shutil.copyfileobj(stream, out, length=1 << 20)
        if limits is not None:
            check_assets(sorted(folder.iterdir()), limits)
        storage.publish(folder, prefix)
    return upload_id, [f"{prefix}/{name}" for name in names]


def save_checked_uploads(
    storage: RunStorage,
    collection: str,
    files: Iterable[tuple[str | None, BinaryIO]],
    limits: AssetLimits,
    scratch: Path,
) -> tuple[str, list[str]]:
    """save_uploads with the attachment checks (AssetError: 422, nothing kept)."""
    return save_uploads(storage, collection, files, scratch, limits)
