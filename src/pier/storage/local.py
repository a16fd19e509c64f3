"""Run outputs on the local disk (the default storage): a key is a path under
the root, <root>/<collection>/<task>/<trajectory_id>/, and pre-staged uploads in
<root>/<collection>/.uploads/<upload_id>/.

Every path handed in from outside is checked: names are single safe path
components, and relative paths are resolved (symlinks included) and must stay
inside the collection's folder.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from pier.errors import InputError, NotFoundError
from pier.storage.base import UPLOAD_ID as _UPLOAD_ID
from pier.storage.base import UPLOADS, RunStorage, StoredFile, StoredUpload, clean_key, not_found

_FORBIDDEN = ("/", "\\", "\x00")


class Upload(NamedTuple):
    upload_id: str
    path: Path


def check_name(kind: str, name: str) -> str:
    """`name` when it is one safe path component, else InputError. A leading dot
    is refused too: it keeps '.', '..' and pier's own folders (.uploads) apart."""
    if not name or name.startswith(".") or any(c in name for c in _FORBIDDEN):
        raise InputError(
            f"invalid {kind} name {name!r}: use a non-empty name without '/', '\\' or a leading '.'"
        )
    return name


# The one rule for collection names, the API's and the CLI's (a name `pier run`
# accepted and the API then refused would strand that collection's runs).
COLLECTION_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
COLLECTION_NAME_RULE = "letters, digits, '-', '_' and '.', starting with a letter or digit, at most 128"
_COLLECTION_NAME = re.compile(COLLECTION_NAME_PATTERN)


def check_collection_name(name: str) -> str:
    """`name` when it is a valid collection name, else InputError saying the rule."""
    if not _COLLECTION_NAME.fullmatch(name):
        raise InputError(f"invalid collection name {name!r}: use {COLLECTION_NAME_RULE}")
    return name


class LocalStorage(RunStorage):
    def __init__(self, root: Path):
        self.root = Path(root).expanduser().absolute()
        self.url = self.root.as_uri()

    # the port

    def publish(self, folder: Path, prefix: str) -> None:
        """Moves the folder's contents into place: a rename on the same file
        system, so publishing costs nothing however big the outputs are."""
        _merge_move(folder, self._key_path(prefix))

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        path = self._key_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def put_stream(self, key: str, stream: BinaryIO, content_type: str = "application/octet-stream") -> None:
        path = self._key_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        with open(tmp, "wb") as out:
            shutil.copyfileobj(stream, out, length=1 << 20)
        os.replace(tmp, path)

    def stat(self, key: str) -> StoredFile:
        path = self._file(key)
        return StoredFile(key.lstrip("/"), path.stat().st_size)

    def open(self, key: str) -> BinaryIO:
        return open(self._file(key), "rb")

    def local_path(self, key: str) -> Path | None:
        return self._file(key)

    def where(self, key: str) -> str:
        return str(self._key_path(key))

    def files(self, prefix: str) -> Iterator[StoredFile]:
        folder = self._key_path(prefix) if prefix else self.root
        if not folder.is_dir() or folder.is_symlink():
            return
        keyed = sorted((path.relative_to(self.root).as_posix(), path) for path in _regular_files(folder))
        for key, path in keyed:  # sorted by key, as object stores list them
            yield StoredFile(key, path.stat().st_size)

    def delete(self, prefix: str) -> None:
        shutil.rmtree(self._key_path(prefix), ignore_errors=True)

    def touch_upload(self, collection: str, upload_id: str) -> None:
        self.upload_path(collection, upload_id).touch()

    def _key_path(self, key: str) -> Path:
        cleaned = clean_key(key)
        if cleaned is None:
            raise InputError(f"invalid storage key {key!r}: use a relative path without '.' or '..' parts")
        return self.root / cleaned

    def _file(self, key: str) -> Path:
        """The regular file a key names, never outside its collection's folder."""
        head, _, rest = key.lstrip("/").partition("/")
        try:
            return self.resolve(head, rest)
        except (InputError, NotFoundError):
            raise not_found(key) from None

    # the local folder's own

    def collection_dir(self, collection: str) -> Path:
        return self.root / check_name("collection", collection)

    def run_dir(self, collection: str, task: str, trajectory_id: str) -> Path:
        """The run's folder, created when missing."""
        path = self._run_path(collection, task, trajectory_id)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def resolve(self, collection: str, relative_path: str) -> Path:
        """The stored file at `relative_path` inside the collection's folder.
        NotFoundError for a missing file, a folder, or anything that resolves
        (through '..' or a symlink) outside the collection's folder."""
        base = self.collection_dir(collection).resolve()
        missing = NotFoundError(f"file {relative_path!r} not found in collection {collection!r}")
        if "\x00" in relative_path:
            raise missing
        target = (base / relative_path.lstrip("/")).resolve()
        if not target.is_relative_to(base) or not target.is_file():
            raise missing
        return target

    def write_run_zip(self, collection: str, task: str, trajectory_id: str, out: BinaryIO) -> None:
        """Write a zip of the run's folder to `out`. Symlinks are left out, so the
        archive never holds anything from outside the folder."""
        folder = self._run_path(collection, task, trajectory_id)
        if not folder.is_dir():
            raise NotFoundError(f"no stored outputs for run {trajectory_id!r} ({collection}/{task})")
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in _regular_files(folder):
                archive.write(path, path.relative_to(folder).as_posix())

    def zip_run(self, collection: str, task: str, trajectory_id: str) -> bytes:
        """The run's folder as zip bytes (see write_run_zip)."""
        buffer = io.BytesIO()
        self.write_run_zip(collection, task, trajectory_id, buffer)
        return buffer.getvalue()

    def upload_dir(self, collection: str) -> Upload:
        """A new, empty folder for files uploaded before a run; its id names it."""
        upload_id = uuid.uuid4().hex
        path = self.collection_dir(collection) / UPLOADS / upload_id
        path.mkdir(parents=True)
        return Upload(upload_id, path)

    def upload_path(self, collection: str, upload_id: str) -> Path:
        """The folder of an earlier upload. NotFoundError when it does not exist."""
        path = self.collection_dir(collection) / UPLOADS / upload_id
        if not _UPLOAD_ID.match(upload_id) or not path.is_dir():
            raise NotFoundError(f"upload {upload_id!r} not found in collection {collection!r}")
        return path

    def uploads(self) -> Iterator[StoredUpload]:
        """Every upload folder of every collection, with its age's reference: the
        folder's last change (its last file written)."""
        if not self.root.is_dir():
            return
        for collection in sorted(self.root.iterdir()):
            folder = collection / UPLOADS
            if collection.name.startswith(".") or not folder.is_dir():
                continue
            for upload in sorted(folder.iterdir()):
                if _UPLOAD_ID.match(upload.name) and upload.is_dir() and not upload.is_symlink():
                    yield StoredUpload(collection.name, upload.name, upload.stat().st_mtime)

    def _run_path(self, collection: str, task: str, trajectory_id: str) -> Path:
        return (
            self.collection_dir(collection)
            / check_name("task", task)
            / check_name("trajectory", trajectory_id)
        )


def _merge_move(source: Path, dest: Path) -> None:
    """Move source's contents into dest (created when missing), replacing files
    of the same name; a rename when both are on one file system."""
    if not source.is_dir():
        return
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, dest)
        return
    for item in source.iterdir():
        target = dest / item.name
        if item.is_dir() and not item.is_symlink() and target.is_dir() and not target.is_symlink():
            _merge_move(item, target)
        else:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            shutil.move(item, target)


def _regular_files(folder: Path) -> list[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(folder):  # does not follow symlinked dirs
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                files.append(path)
    return files
