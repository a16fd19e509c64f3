"""Tar streams in and out of sandboxes: files never travel as command arguments."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, BinaryIO, cast

CHUNK = 1 << 20


class ChunkReader:
    """A readable file over an iterator of byte chunks, so a tar stream from the
    engine is read as it arrives: at most one read's worth is held at a time.
    (tarfile's stream mode only calls read(n); an io.BufferedReader in between
    would copy every byte once more.)"""

    def __init__(self, chunks: Iterable[bytes]):
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = b""

    def read(self, size: int = -1) -> bytes:
        parts, have = [self._pending], len(self._pending)
        while size < 0 or have < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            parts.append(chunk)
            have += len(chunk)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if size < 0 or len(data) <= size:
            self._pending = b""
            return data
        self._pending = data[size:]
        return data[:size]


def file_chunks(stream: BinaryIO, size: int = CHUNK) -> Iterator[bytes]:
    """A file's bytes in chunks: what put_archive streams to the engine."""
    while chunk := stream.read(size):
        yield chunk


def tar_of_files(files: Mapping[str, bytes], mode: int = 0o644, dirs: Sequence[str] = ()) -> bytes:
    """A tar of files (relative name -> content), after an entry (0755) per folder
    of `dirs`: folders to make even when no file goes in them."""
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for folder in dirs:
            entry = tarfile.TarInfo(folder.strip("/"))
            entry.type, entry.mode, entry.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(entry)
        for name, content in files.items():
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size = len(content)
            info.mode = mode
            info.mtime = now
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def tar_members(files: Mapping[str, bytes], mode: int = 0o644) -> bytes:
    """Tar members (relative name -> content) without the end-of-archive blocks, to
    go in front of another tar stream: the engine reads both as one archive."""
    out = io.BytesIO()
    now = time.time()
    for name, content in files.items():
        info = tarfile.TarInfo(name.lstrip("/"))
        info.size, info.mode, info.mtime = len(content), mode, now
        out.write(info.tobuf(format=tarfile.DEFAULT_FORMAT, encoding="utf-8", errors="surrogateescape"))
        out.write(content)
        out.write(b"\0" * (-len(content) % tarfile.BLOCKSIZE))
    return out.getvalue()


def tar_of_path(path: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(path, arcname=path.name)
    return buf.getvalue()


class OverBudget(Exception):
    """A tar stream holds more than its Budget allows; `written` files were kept."""

    def __init__(self, message: str, written: list[Path]):
        super().__init__(message)
        self.written = written


class Budget:
    """How many bytes and files extraction may still write (shared by several
    streams). A file that would pass it is never written."""

    def __init__(self, max_bytes: int, max_files: int):
        self.max_bytes, self.max_files = max_bytes, max_files
        self.bytes = self.files = 0

    def take(self, name: str, size: int) -> str | None:
        """None when `size` more bytes in one more file fit, else why not."""
        if self.files + 1 > self.max_files:
            return f"more than {self.max_files} files"
        if self.bytes + size > self.max_bytes:
            return f"more than {self.max_bytes} bytes ({name} alone is {size})"
        self.bytes += size
        self.files += 1
        return None


def extract_stream(
    chunks: Iterable[bytes], dest: Path, strip_top: bool = True, budget: Budget | None = None
) -> list[Path]:
    """Extract a tar stream from a sandbox into dest, refusing links and any path
    that would land outside dest. Returns the regular files written. The stream
    is read as it comes (one chunk and one file buffer in memory), never whole.
    Past `budget`, raises OverBudget before writing the file that would pass it."""
    data = ChunkReader(chunks)
    written: list[Path] = []
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    with tarfile.open(fileobj=cast(IO[bytes], data), mode="r|", bufsize=CHUNK) as tar:
        for member in tar:
            name = member.name
            if strip_top:
                parts = Path(name).parts[1:]
                if not parts:
                    continue
                name = str(Path(*parts))
            target = (root / name).resolve()
            if not target.is_relative_to(root) or not (member.isfile() or member.isdir()):
                continue
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            refused = budget.take(name, member.size) if budget else None
            if refused:
                raise OverBudget(refused, written)
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(member)
            if src is None:
                continue
            with open(target, "wb") as out:
                while chunk := src.read(CHUNK):
                    out.write(chunk)
            written.append(target)
    return written
