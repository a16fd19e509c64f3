"""Attached files: checked on the host before any sandbox exists, then placed in
/app/assets with zips extracted. An entry that would land outside /app/assets is
refused, never written; so is an attachment past the size limits (a zip bomb).

The limits are checked on the sizes a zip declares, before anything is expanded:
Python's zipfile never yields more than an entry's declared size (and checks its
CRC), so an archive that lies about a size fails while being placed, never
writes more than it declared."""

from __future__ import annotations

import io
import posixpath
import stat
import tarfile
import time
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pier.errors import AssetError

if TYPE_CHECKING:
    from pier.settings import Settings

ASSETS_DIR = "/app/assets"

# A zip's ratio is only held against it past this size: tiny archives of
# repetitive text compress far past any sane ratio and harm nobody.
RATIO_FLOOR_BYTES = 1 << 20


@dataclass(frozen=True)
class AssetLimits:
    """How much the attached files of one run may become in /app/assets."""

    total_bytes: int = 1 << 30
    files: int = 10_000
    file_bytes: int = 512 << 20
    zip_ratio: float = 100.0

    @classmethod
    def of(cls, settings: Settings) -> AssetLimits:
        return cls(
            settings.max_assets_bytes,
            settings.max_assets_files,
            settings.max_asset_file_bytes,
            settings.max_zip_ratio,
        )


def check_assets(paths: Iterable[Path], limits: AssetLimits | None = None) -> tuple[Path, ...]:
    """Every file exists, every zip is safe to extract, and all of them together
    fit the limits once expanded. Raises AssetError naming the file."""
    limits = limits or AssetLimits()
    checked: list[Path] = []
    tally = _Tally(limits)
    for path in paths:
        if not path.is_file():
            raise AssetError(f"attached file {path} does not exist or is not a file")
        if zipfile.is_zipfile(path):
            _check_zip(path, tally)
        else:
            tally.add(path.name, path.name, path.stat().st_size, source=str(path))
        checked.append(path)
    return tuple(checked)


class _Tally:
    """Counts what the attachments expand to, refusing past a limit."""

    def __init__(self, limits: AssetLimits):
        self.limits = limits
        self.bytes = 0
        self.files = 0
        self.placed: dict[str, str] = {}  # path in /app/assets -> what puts a file there

    def add(self, attachment: str, name: str, size: int, source: str | None = None) -> None:
        """One file `name` in /app/assets from `attachment` (`source` says where it
        comes from); AssetError when two sources land on the same path."""
        self._place(posixpath.normpath(name.replace("\\", "/")), source or f"{attachment} (entry {name})")
        limits = self.limits
        self.bytes += size
        self.files += 1
        where = attachment if name == attachment else f"{attachment}: entry '{name}'"
        if size > limits.file_bytes:
            raise _too_big(f"{where} is {_size(size)}", f"one attached file may be (at most {_size(limits.file_bytes)}",
                           "PIER_MAX_ASSET_FILE_BYTES")  # fmt: skip
        if self.files > limits.files:
            raise _too_big(f"{where} makes more than {limits.files} files in {ASSETS_DIR}",
                           f"a run's attached files may make (at most {limits.files} files", "PIER_MAX_ASSETS_FILES")  # fmt: skip
        if self.bytes > limits.total_bytes:
            raise _too_big(f"{where} brings the attached files to more than {_size(limits.total_bytes)}",
                           f"a run's attached files may make (at most {_size(limits.total_bytes)} in all",
                           "PIER_MAX_ASSETS_BYTES")  # fmt: skip

    def _place(self, where: str, source: str) -> None:
        earlier = self.placed.setdefault(where, source)
        if earlier != source:
            raise AssetError(
                f"attached files clash: {earlier} and {source} would both be {ASSETS_DIR}/{where}; "
                "rename one of them (or remove it from the zip), so that neither overwrites the other"
            )

    def ratio(self, path: Path, expanded: int) -> None:
        packed = max(path.stat().st_size, 1)
        if expanded > RATIO_FLOOR_BYTES and expanded / packed > self.limits.zip_ratio:
            raise _too_big(
                f"{path.name} would expand {expanded / packed:.0f} times ({_size(packed)} to {_size(expanded)})",
                f"a zip may expand (at most {self.limits.zip_ratio:g} times its size; a zip bomb expands more",
                "PIER_MAX_ZIP_RATIO",
            )


def _too_big(what: str, limit: str, setting: str) -> AssetError:
    """`what` (the file and its size), `limit` (what may be, and "(at most N"),
    and the setting that says so, as one sentence that ends with what to do."""
    return AssetError(
        f"{what}, more than {limit}, {setting}): it was refused before anything was copied or "
        f"extracted. Attach less (split the file, or have the runbook fetch it), or ask the operator "
        f"to raise {setting}"
    )


def _size(count: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            return f"{count / (1 << shift):.1f} {unit}"
    return f"{count} bytes"


def _check_zip(path: Path, tally: _Tally) -> None:
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        for info in infos:
            reason = _unsafe_entry(info)
            if reason:
                raise AssetError(
                    f"{path.name}: entry '{info.filename}' {reason}; "
                    "the archive was rejected and nothing was extracted"
                )
        tally.ratio(path, sum(info.file_size for info in infos))
        for info in infos:
            if not info.is_dir():
                tally.add(path.name, info.filename, info.file_size)


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
