"""The storage port: where runs' outputs and uploaded inputs live, by key.

A key is a relative POSIX path, `<collection>/<task>/<trajectory id>/results/x.md`
or `<collection>/.uploads/<upload id>/data.csv`: the same string a run record
keeps and `GET /api/v1/file/{key}` takes. Work happens in a local scratch folder
(collect, redaction, checks); a run publishes it once, at the end. Every
implementation streams: nothing is ever held whole in memory.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from pier.errors import NotFoundError

UPLOADS = ".uploads"
UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")


class StoredFile(NamedTuple):
    key: str
    size: int


class StoredUpload(NamedTuple):
    collection: str
    upload_id: str
    changed: float  # its last write or use, seconds since the epoch


def clean_key(key: str) -> str | None:
    """`key` without a leading '/', or None when it is no usable key: empty,
    a '.', '..' or empty segment, a NUL or a backslash. Object stores take any
    string as a key, so this is what keeps '..' from meaning anything anywhere."""
    key = key.lstrip("/")
    parts = key.split("/")
    if not key or "\x00" in key or "\\" in key or any(p in ("", ".", "..") for p in parts):
        return None
    return key


def upload_prefix(collection: str, upload_id: str) -> str:
    return f"{collection}/{UPLOADS}/{upload_id}"


class RunStorage(ABC):
    """Runs' files by key. Implementations: LocalStorage (a folder), S3Storage."""

    url: str  # where the storage is, for people (file:///..., s3://bucket/prefix)

    @abstractmethod
    def publish(self, folder: Path, prefix: str) -> None:
        """Store every regular file under `folder` as `<prefix>/<relative path>`,
        streamed from disk; `folder` may be emptied (the local store moves it)."""

    @abstractmethod
    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        """Store small bytes (run.json) at `key`, replacing what was there."""

    @abstractmethod
    def put_stream(self, key: str, stream: BinaryIO, content_type: str = "application/octet-stream") -> None:
        """Store what `stream` holds at `key`, read in chunks (any size)."""

    @abstractmethod
    def stat(self, key: str) -> StoredFile:
        """The stored file at `key`; NotFoundError when there is none (a folder is none)."""

    @abstractmethod
    def open(self, key: str) -> BinaryIO:
        """The file's bytes as a stream to read in chunks; NotFoundError when missing."""

    @abstractmethod
    def files(self, prefix: str) -> Iterator[StoredFile]:
        """Every stored file under `prefix/` (every file of the storage when
        `prefix` is ''), sorted by key."""

    @abstractmethod
    def delete(self, prefix: str) -> None:
        """Delete everything under `prefix/`; nothing there is no error."""

    @abstractmethod
    def uploads(self) -> Iterator[StoredUpload]:
        """Every upload of every collection, with when it was last written or used."""

    @abstractmethod
    def touch_upload(self, collection: str, upload_id: str) -> None:
        """Mark the upload used now: its time to expire starts again."""

    def abort_abandoned_uploads(self, older_than_sec: float, now: float | None = None) -> int:
        """Abort the incomplete multipart uploads begun more than
        `older_than_sec` ago (a worker that died mid-save, an abort that failed
        in an outage): their parts are stored, and billed, until then. How
        many went; a storage with no such uploads has none."""
        return 0

    def check(self) -> None:
        """Raise PierError, saying what to fix, when the storage cannot be used:
        `pier serve` calls it at start rather than failing the first run."""

    def where(self, key: str) -> str:
        """Where `key` is, for people (a log line, `pier run`'s summary)."""
        return f"{self.url}/{key}"

    def local_path(self, key: str) -> Path | None:
        """The file on this machine's disk when the storage is a local folder, else None."""
        return None

    def presigned_url(self, key: str, expires_sec: int) -> str | None:
        """A URL that serves the file for `expires_sec` without pier, when the storage has them."""
        return None

    def fetch(self, key: str, dest: Path) -> Path:
        """A local file with the stored bytes: the file itself on a local store,
        else a copy written to `dest` (streamed)."""
        path = self.local_path(key)
        if path is not None:
            return path
        dest.parent.mkdir(parents=True, exist_ok=True)
        with self.open(key) as source, open(dest, "wb") as out:
            while chunk := source.read(1 << 20):
                out.write(chunk)
        return dest

    def exists(self, key: str) -> bool:
        try:
            self.stat(key)
        except NotFoundError:
            return False
        return True


def not_found(key: str) -> NotFoundError:
    return NotFoundError(f"file {key!r} not found in storage: check the path")
