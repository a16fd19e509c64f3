"""A run's stored files as a zip, made while it is sent: the stdlib's zipfile
writes to a pipe that is emptied after every chunk, so memory holds one chunk
and the central directory (a few dozen bytes a file), whatever the outputs'
size, and the first bytes go out before the last file is read."""

from __future__ import annotations

import io
import time
import zipfile
from collections.abc import Iterator

from pier.errors import NotFoundError
from pier.storage.base import RunStorage, StoredFile

CHUNK = 1 << 20


class _Pipe(io.RawIOBase):
    """A write-only, unseekable stream whose bytes are taken out as they come."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        self._chunks.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        out = b"".join(self._chunks)
        self._chunks.clear()
        return out


def zip_stream(storage: RunStorage, prefix: str) -> Iterator[bytes]:
    """The files under `prefix/` (names relative to it) as zip bytes, chunk by
    chunk. NotFoundError before the first byte when nothing is stored there."""
    files = storage.files(prefix)
    first = next(files, None)
    if first is None:
        raise NotFoundError(f"no stored outputs under {prefix!r}")
    return _zipped(storage, prefix, first, files)


def _zipped(
    storage: RunStorage, prefix: str, first: StoredFile, rest: Iterator[StoredFile]
) -> Iterator[bytes]:
    pipe = _Pipe()
    stamp = time.localtime()[:6]
    with zipfile.ZipFile(pipe, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for item in _chain(first, rest):
            info = zipfile.ZipInfo(item.key[len(prefix) + 1 :], date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.file_size = item.size  # lets zipfile pick zip64 for big files up front
            with storage.open(item.key) as source, archive.open(info, "w") as target:
                while chunk := source.read(CHUNK):
                    target.write(chunk)
                    if data := pipe.take():
                        yield data
            if data := pipe.take():
                yield data
    yield pipe.take()


def _chain(first: StoredFile, rest: Iterator[StoredFile]) -> Iterator[StoredFile]:
    yield first
    yield from rest
