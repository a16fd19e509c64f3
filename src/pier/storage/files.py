"""Describing stored files for a run record."""

from __future__ import annotations

import mimetypes
from pathlib import Path, PurePath
from urllib.parse import quote

from pier.record import ResultFile

FALLBACK_CONTENT_TYPE = "application/octet-stream"
# Types that agents produce often and that some hosts' mime tables miss.
_EXTRA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".csv": "text/csv",
    ".log": "text/plain",
    ".ts": "text/plain",
    ".py": "text/x-python",
    ".webp": "image/webp",
}
# mimetypes reports report.tar.gz as a tar "encoded" with gzip; the bytes on disk
# are gzip, and that is what a download must say.
_ENCODING_TYPES = {
    "gzip": "application/gzip",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
    "br": "application/x-brotli",
    "compress": "application/x-compress",
}


def content_type(path: PurePath) -> str:
    """The file's MIME type from its name; application/octet-stream when unknown."""
    suffix = path.suffix.lower()
    if suffix in _EXTRA_TYPES:
        return _EXTRA_TYPES[suffix]
    guessed, encoding = mimetypes.guess_type(path.name, strict=False)
    if encoding:
        return _ENCODING_TYPES.get(encoding, FALLBACK_CONTENT_TYPE)
    return guessed or FALLBACK_CONTENT_TYPE


def attachment(name: str) -> str:
    """The Content-Disposition of a download named `name` (RFC 6266, a UTF-8
    form when needed), as Starlette's FileResponse writes it."""
    quoted = quote(name)
    if quoted == name:
        return f'attachment; filename="{name}"'
    return f"attachment; filename*=utf-8''{quoted}"


def describe(path: Path, base: Path) -> ResultFile:
    """A ResultFile for `path`: its path relative to `base` (POSIX), content type,
    extension (lower case, without the dot; '' when none) and size in bytes."""
    return ResultFile(
        path=path.relative_to(base).as_posix(),
        content_type=content_type(path),
        extension=path.suffix.lower().lstrip("."),
        size=path.stat().st_size,
    )
