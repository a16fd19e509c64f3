"""Tar streams in and out of sandboxes: files never travel as command arguments."""

from __future__ import annotations

import io
import shutil
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, BinaryIO, cast

from pier.names import file_path

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


class FileTar:
    """A tar kept in a file, streamed in chunks (never whole in memory) and, unlike
    a generator, readable again from its start: a backend may send it a second
    time after a transient engine error (pier.sandbox.docker.retrying)."""

    def __init__(self, path: Path, size: int = CHUNK):
        self.path, self.size = path, size

    def __iter__(self) -> Iterator[bytes]:
        with open(self.path, "rb") as stream:
            yield from file_chunks(stream, self.size)


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


class OverBudget(Exception):
    """A tar stream holds more than its Budget allows; `written` files were kept.
    `top`: the folder (a route of extract_routed) the file that passed it was in."""

    def __init__(self, message: str, written: list[Path], top: str = ""):
        super().__init__(message)
        self.written = written
        self.top = top


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


# What a tar member that is neither a file nor a folder is, as a warning names it.
_KINDS = {
    tarfile.SYMTYPE: "a symbolic link (not followed)",
    tarfile.FIFOTYPE: "a named pipe (fifo)",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
}


# Where a member goes: (the name of its folder, that folder's dest, its name under it),
# or None for a member written nowhere (a folder's own entry, or outside every folder).
Placement = tuple[str, Path, str]


def extract_stream(
    chunks: Iterable[bytes],
    dest: Path,
    strip_top: bool = True,
    budget: Budget | None = None,
    skipped: list[str] | None = None,
) -> list[Path]:
    """Extract a tar stream from a sandbox into dest, refusing any path that would
    land outside dest. Returns the regular files written; a second name of a file
    (a hard link) is written as a file of its own. Symbolic links, fifos and
    devices are not written: each is added to `skipped` ("name: what it is").
    The stream is read as it comes (one chunk and one file buffer in memory),
    never whole. Past `budget`, raises OverBudget before writing the file that
    would pass it."""
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()

    def place(name: str) -> Placement | None:
        under = _stripped(name, strip_top)
        return None if under is None else ("", root, under)

    return _extract(chunks, place, budget, skipped)


def extract_routed(
    chunks: Iterable[bytes],
    routes: Mapping[str, Path],
    budget: Budget | None = None,
    skipped: list[str] | None = None,
) -> list[Path]:
    """extract_stream for one tar of several folders (`tar -c -C / logs/agent
    app/results`): each member goes into the dest its folder routes to (`routes`:
    the folder as the tar names it, e.g. "app/results", -> dest), under its name
    below that folder; members of no route are left out. Every dest is made.
    A skipped member is named by its sandbox path ("/app/results/pipe: ...");
    OverBudget's `top` is the route ("app/results")."""
    roots = {top.strip("/"): dest for top, dest in routes.items()}
    for dest in roots.values():
        dest.mkdir(parents=True, exist_ok=True)
    resolved = {top: dest.resolve() for top, dest in roots.items()}

    def place(name: str) -> Placement | None:
        clean = name.strip("/")
        for top, root in resolved.items():
            if clean.startswith(top + "/"):
                return (top, root, clean[len(top) + 1 :])
        return None

    return _extract(chunks, place, budget, skipped)


def _extract(
    chunks: Iterable[bytes],
    place: Callable[[str], Placement | None],
    budget: Budget | None,
    skipped: list[str] | None,
) -> list[Path]:
    data = ChunkReader(chunks)
    written: list[Path] = []
    by_member: dict[str, Path] = {}  # archive name -> where its file was written
    with tarfile.open(fileobj=cast(IO[bytes], data), mode="r|", bufsize=CHUNK) as tar:
        for member in tar:
            placed = place(member.name)
            if placed is None:
                continue
            top, root, name = placed
            name = file_path(name)  # names are data: printable UTF-8 from here on (pier.names)
            shown = f"/{top}/{name}" if top else name
            target = (root / name).resolve()
            if not target.is_relative_to(root):
                continue
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            if not (member.isfile() or member.islnk()):
                if skipped is not None:
                    skipped.append(f"{shown}: {_KINDS.get(member.type, 'not a regular file')}")
                continue
            source = by_member.get(member.linkname) if member.islnk() else None
            if member.islnk() and source is None:
                if skipped is not None:
                    skipped.append(f"{shown}: a hard link to {member.linkname}, which was not collected")
                continue
            size = source.stat().st_size if source is not None else member.size
            refused = budget.take(name, size) if budget else None
            if refused:
                raise OverBudget(refused, written, top)
            target.parent.mkdir(parents=True, exist_ok=True)
            if source is not None:
                shutil.copyfile(source, target)
            else:
                _write(tar, member, target)
            by_member[member.name] = target
            written.append(target)
    return written


def _stripped(name: str, strip_top: bool) -> str | None:
    """The member's path under dest (without the archive's top folder), or None
    for the top folder itself."""
    if not strip_top:
        return name
    parts = Path(name).parts[1:]
    return str(Path(*parts)) if parts else None


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    src = tar.extractfile(member)
    with open(target, "wb") as out:
        while src is not None and (chunk := src.read(CHUNK)):
            out.write(chunk)
