"""Tar streams in and out of sandboxes: files never travel as command arguments."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path


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


def tar_of_path(path: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(path, arcname=path.name)
    return buf.getvalue()


def extract_stream(chunks: Iterable[bytes], dest: Path, strip_top: bool = True) -> list[Path]:
    """Extract a tar stream from a sandbox into dest, refusing links and any path
    that would land outside dest. Returns the regular files written."""
    data = io.BytesIO(b"".join(chunks))
    written: list[Path] = []
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    with tarfile.open(fileobj=data, mode="r|") as tar:
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
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(member)
            if src is None:
                continue
            with open(target, "wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            written.append(target)
    return written
