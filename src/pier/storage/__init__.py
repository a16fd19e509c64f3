"""Where run outputs and uploads live: the storage port (RunStorage) and its
implementations, a local folder (the default) and S3-compatible object storage,
chosen by PIER_STORAGE_URL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from pier.errors import InputError
from pier.storage.base import RunStorage, StoredFile, StoredUpload, clean_key
from pier.storage.files import content_type, describe
from pier.storage.local import LocalStorage, Upload, check_name

__all__ = [
    "LocalStorage",
    "RunStorage",
    "StoredFile",
    "StoredUpload",
    "Upload",
    "check_name",
    "clean_key",
    "content_type",
    "describe",
    "open_storage",
]


def open_storage(url: str) -> RunStorage:
    """The storage a URL names: `file:///path` (a local folder) or
    `s3://bucket/prefix` (endpoint and credentials from the AWS variables)."""
    if url.startswith("s3://"):
        from pier.storage.s3 import S3Storage  # boto3 is only imported when used

        return S3Storage(url)
    parsed = urlparse(url)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost") or not parsed.path:
        raise InputError(
            f"storage URL {url!r} is not usable: write file:///ABSOLUTE/PATH or s3://BUCKET/PREFIX"
        )
    return LocalStorage(Path(unquote(parsed.path)))
