"""Files as the API names them: `<collection>/<path inside the collection's
storage folder>`, e.g. `team-a/.uploads/<upload id>/data.csv` or
`team-a/report/<run id>/results/report.md`. A path is only ever looked up inside
the caller's own collection folder."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from pier.errors import AssetError, InputError, NotFoundError
from pier.lifecycle.assets import AssetLimits, check_assets
from pier.storage.local import UPLOADS, LocalStorage

MAX_FILE_NAME = 255  # what Linux file systems take


def api_path(storage: LocalStorage, collection: str, path: Path) -> str:
    """The API name of a stored file."""
    return f"{collection}/{path.relative_to(storage.collection_dir(collection)).as_posix()}"


def resolve_api_path(storage: LocalStorage, collection: str, name: str) -> Path:
    """The stored file an API path names, if it lies in `collection`'s folder.
    NotFoundError otherwise: another collection's file, a '..' or symlink that
    escapes, and a missing file all look the same to the caller."""
    missing = NotFoundError(f"file {name!r} not found in collection {collection!r}: check the path")
    head, _, rest = name.lstrip("/").partition("/")
    if head != collection or not rest:
        raise missing
    try:
        return storage.resolve(collection, rest)
    except InputError:  # not even a valid collection name ('..')
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
    storage: LocalStorage, collection: str, files: Iterable[tuple[str | None, BinaryIO]]
) -> tuple[str, list[str]]:
    """Store files in a new upload folder; returns its id and the files' API paths."""
    named = [(upload_name(filename), stream) for filename, stream in files]
    names = [name for name, _ in named]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InputError(f"files: two files are named {duplicates[0]!r}: rename one (names must be unique)")
    upload = storage.upload_dir(collection)
    paths = []
    for name, stream in named:
        target = upload.path / name
        with open(target, "wb") as out:
            shutil.copyfileobj(stream, out, length=1 << 20)
        paths.append(api_path(storage, collection, target))
    return upload.upload_id, paths


def save_checked_uploads(
    storage: LocalStorage, collection: str, files: Iterable[tuple[str | None, BinaryIO]], limits: AssetLimits
) -> tuple[str, list[str]]:
    """save_uploads, then the checks a run makes of its attachments (zip entries,
    expanded size, zip bombs), so a file no run could use is refused at once
    (AssetError: 422) and not kept. Only compressed bytes are ever written."""
    upload_id, paths = save_uploads(storage, collection, files)
    folder = storage.collection_dir(collection) / UPLOADS / upload_id
    try:
        check_assets(sorted(folder.iterdir()), limits)
    except AssetError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return upload_id, paths
