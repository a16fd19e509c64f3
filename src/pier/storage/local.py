"""Run outputs on the local disk: <root>/<collection>/<task>/<trajectory_id>/,
and pre-staged uploads in <root>/<collection>/.uploads/<upload_id>/.

Every path handed in from outside is checked: names are single safe path
components, and relative paths are resolved (symlinks included) and must stay
inside the collection's folder.
"""

from __future__ import annotations

import io
import os
import re
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from pier.errors import NotFoundError
from pier.names import check_name

UPLOADS = ".uploads"
_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")


class Upload(NamedTuple):
    upload_id: str
    path: Path


class StoredUpload(NamedTuple):
    collection: str
    upload_id: str
    path: Path
    changed: float  # the folder's mtime, seconds since the epoch


class LocalStorage:
    def __init__(self, root: Path):
        self.root = Path(root).expanduser().absolute()

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
                    yield StoredUpload(collection.name, upload.name, upload, upload.stat().st_mtime)

    def _run_path(self, collection: str, task: str, trajectory_id: str) -> Path:
        return (
            self.collection_dir(collection)
            / check_name("task", task)
            / check_name("trajectory", trajectory_id)
        )


def _regular_files(folder: Path) -> list[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(folder):  # does not follow symlinked dirs
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                files.append(path)
    return files
