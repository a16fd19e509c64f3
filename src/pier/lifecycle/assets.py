"""Attached files: checked on the host before any sandbox exists, then placed in
/app/assets with zips extracted. An entry that would land outside /app/assets is
refused, never written."""

from __future__ import annotations

import io
import posixpath
import stat
import tarfile
import time
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from pier.errors import AssetError

ASSETS_DIR = "/app/assets"


def check_assets(paths: Iterable[Path]) -> tuple[Path, ...]:
    """Every file exists and every zip is safe to extract. Raises AssetError."""
    checked: list[Path] = []
    names: set[str] = set()
    for path in paths:
        if not path.is_file():
            raise AssetError(f"attached file {path} does not exist or is not a file")
        if path.name in names:
            raise AssetError(f"two attached files are named {path.name}: rename one")
        names.add(path.name)
        if zipfile.is_zipfile(path):
            _check_zip(path)
        checked.append(path)
    return tuple(checked)


def _check_zip(path: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            reason = _unsafe_entry(info)
            if reason:
                raise AssetError(
                    f"{path.name}: entry '{info.filename}' {reason}; "
                    "the archive was rejected and nothing was extracted"
                )


def _unsafe_entry(info: zipfile.ZipInfo) -> str | None:
    name = info.filename.replace("\\", "/")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    depth = 0
    for part in PurePosixPath(name).parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return "would be written outside /app/assets (../)"
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    return None


def assets_tar(paths: Iterable[Path], out: Path) -> Path:
    """A tar of the assets as they appear in /app/assets: zips extracted in place of
    the archive, other files as they are. Written to `out`, never held in memory."""
    with tarfile.open(out, "w") as tar:
        add_assets(tar, paths)
    return out


def add_assets(tar: tarfile.TarFile, paths: Iterable[Path], prefix: str = "") -> None:
    """Add the assets to `tar` as they appear in /app/assets, under `prefix`."""
    for path in paths:
        if zipfile.is_zipfile(path):
            _add_zip(tar, path, prefix)
        else:
            tar.add(path, arcname=posixpath.join(prefix, path.name))


def setup_tar(
    out: Path, dirs: Iterable[str], assets: Iterable[Path], files: Mapping[str, bytes], file_mode: int
) -> Path:
    """One archive for the sandbox's root: the empty folders `dirs`, the assets in
    /app/assets and `files` (absolute path -> content, mode `file_mode`). Set up
    sends it in one round trip where it took one per folder. Written to `out`."""
    now = time.time()
    with tarfile.open(out, "w") as tar:
        for folder in dirs:
            entry = tarfile.TarInfo(folder.strip("/"))
            entry.type, entry.mode, entry.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(entry)
        add_assets(tar, assets, prefix=ASSETS_DIR.strip("/"))
        for path, content in files.items():
            member = tarfile.TarInfo(path.strip("/"))
            member.size, member.mode, member.mtime = len(content), file_mode, now
            tar.addfile(member, io.BytesIO(content))
    return out


def _add_zip(tar: tarfile.TarFile, path: Path, prefix: str = "") -> None:
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name = posixpath.join(prefix, posixpath.normpath(info.filename.replace("\\", "/")))
            member = tarfile.TarInfo(name)
            if info.is_dir():
                member.type = tarfile.DIRTYPE
                member.mode = 0o755
                tar.addfile(member)
                continue
            member.size = info.file_size
            member.mode = 0o644
            with archive.open(info) as source:
                tar.addfile(member, source)
