"""Run outputs in S3-compatible object storage (AWS S3, MinIO, R2, GCS's S3 API,
SeaweedFS), through boto3. `s3://bucket/prefix`: every key is stored as
`<prefix>/<key>`. The endpoint, credentials and region come from the standard
AWS variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_REGION) or any other source boto3 reads.

Uploads stream from disk: boto3's transfer manager sends big files as multipart
uploads of `PART_BYTES` with at most `CONCURRENCY` parts in flight, and many
small files side by side, so memory stays near CONCURRENCY x PART_BYTES
whatever the size of the outputs.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, cast

import boto3
from boto3.s3.transfer import TransferConfig, create_transfer_manager
from botocore.config import Config
from botocore.exceptions import ClientError

from pier.errors import InputError, PierError
from pier.storage.base import (
    UPLOAD_ID,
    UPLOADS,
    RunStorage,
    StoredFile,
    StoredUpload,
    clean_key,
    not_found,
    upload_prefix,
)
from pier.storage.files import attachment, content_type

log = logging.getLogger(__name__)

PART_BYTES = 8 << 20
CONCURRENCY = 8
TOUCHED = ".touched"  # an upload's marker object: when a run last named it (no file name starts with '.')
# SeaweedFS keeps its own multipart parts in `.uploads` folders and leaves every
# `.uploads` folder out of listings, so uploads are stored under this name (a task
# name never starts with '.', so it is no run's folder either).
UPLOADS_OBJECT = ".pier-uploads"
_MISSING = {"404", "NoSuchKey", "NotFound"}


def split_url(url: str) -> tuple[str, str]:
    """(bucket, prefix) of `s3://bucket/prefix`; InputError naming the setting otherwise."""
    rest = url.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    if not url.startswith("s3://") or not bucket or (prefix.strip("/") and clean_key(prefix) is None):
        raise InputError(f"PIER_STORAGE_URL {url!r} is not usable: write s3://BUCKET or s3://BUCKET/PREFIX")
    return bucket, prefix.strip("/")


class S3Storage(RunStorage):
    def __init__(self, url: str, client: Any = None):
        self.bucket, self.prefix = split_url(url)
        self.url = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.client = client or boto3.client(
            "s3",
            config=Config(
                max_pool_connections=CONCURRENCY * 2, retries={"mode": "standard"}, signature_version="s3v4"
            ),
        )
        self.transfer = TransferConfig(
            multipart_threshold=PART_BYTES,
            multipart_chunksize=PART_BYTES,
            max_concurrency=CONCURRENCY,
            max_io_queue=CONCURRENCY * 4,
        )

    # the port

    def publish(self, folder: Path, prefix: str) -> None:
        """Every regular file under `folder` (symlinks are left out: an object
        store has none), uploaded side by side by one transfer manager."""
        base = self._name(prefix)
        self._abort_uploads(base)  # what an earlier attempt (or a killed worker) left open
        try:
            with create_transfer_manager(self.client, self.transfer) as manager:
                futures = [
                    manager.upload(
                        str(path),
                        self.bucket,
                        f"{base}/{path.relative_to(folder).as_posix()}",
                        extra_args={"ContentType": content_type(path)},
                    )
                    for path in _regular_files(folder)
                ]
                for future in futures:
                    future.result()
        except BaseException:
            self._abort_uploads(base, quiet=True)  # no part of an incomplete upload stays billed
            raise

    def _abort_uploads(self, base: str, quiet: bool = False) -> None:
        """Abort every incomplete multipart upload under `base/`."""
        try:
            pages = self.client.get_paginator("list_multipart_uploads").paginate(
                Bucket=self.bucket, Prefix=f"{base}/"
            )
            for page in pages:
                for upload in page.get("Uploads") or []:
                    self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                    )
        except Exception:
            if not quiet:
                raise
            log.warning("could not abort the incomplete uploads under %s (storage down?)", base)

    def abort_abandoned_uploads(self, older_than_sec: float, now: float | None = None) -> int:
        now = time.time() if now is None else now
        aborted = 0
        pages = self.client.get_paginator("list_multipart_uploads").paginate(
            Bucket=self.bucket, Prefix=self._root()
        )
        for page in pages:
            for upload in page.get("Uploads") or []:
                begun = upload.get("Initiated")
                if begun is None or now - begun.timestamp() < older_than_sec:
                    continue
                self.client.abort_multipart_upload(
                    Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                )
                aborted += 1
                log.info("aborted the incomplete upload of %s, begun %s", upload["Key"], begun.isoformat())
        return aborted

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        self._call("put_object", Bucket=self.bucket, Key=self._name(key), Body=data, ContentType=content_type)

    def put_stream(self, key: str, stream: BinaryIO, content_type: str = "application/octet-stream") -> None:
        self.client.upload_fileobj(
            stream,
            self.bucket,
            self._name(key),
            ExtraArgs={"ContentType": content_type},
            Config=self.transfer,
        )

    def stat(self, key: str) -> StoredFile:
        name = self._object(key)
        head = self._call("head_object", Bucket=self.bucket, Key=name, missing=key)
        return StoredFile(key.lstrip("/"), int(head["ContentLength"]))

    def open(self, key: str) -> BinaryIO:
        name = self._object(key)
        body = self._call("get_object", Bucket=self.bucket, Key=name, missing=key)["Body"]
        return cast(BinaryIO, body)

    def files(self, prefix: str) -> Iterator[StoredFile]:
        base = self._name(prefix) + "/" if prefix else self._root()
        skip = len(self._root())
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base):
            for item in page.get("Contents", []):
                key = _key_of(item["Key"][skip:])
                if clean_key(key) == key and not key.endswith("/" + TOUCHED):
                    yield StoredFile(key, int(item["Size"]))

    def delete(self, prefix: str) -> None:
        base = self._name(prefix) + "/"
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base)
        for page in pages:
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                self._call("delete_objects", Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})

    def uploads(self) -> Iterator[StoredUpload]:
        """One listing of each collection's `.uploads/`; an upload's age is its
        newest object's (a run naming it writes the marker)."""
        root = self._root()
        collections = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=root, Delimiter="/"
        )
        for page in collections:
            for common in page.get("CommonPrefixes", []):
                collection = common["Prefix"][len(root) :].rstrip("/")
                if collection and not collection.startswith("."):
                    yield from self._uploads_of(collection)

    def touch_upload(self, collection: str, upload_id: str) -> None:
        self.put_bytes(f"{upload_prefix(collection, upload_id)}/{TOUCHED}", b"")

    def check(self) -> None:
        self._call("head_bucket", Bucket=self.bucket)

    def presigned_url(self, key: str, expires_sec: int) -> str | None:
        name = self._object(key)
        self.stat(key)  # a URL for nothing would answer the caller's client a 404 from elsewhere
        file_name = PurePosixPath(key).name
        params = {
            "Bucket": self.bucket,
            "Key": name,
            # what pier itself would answer, so clients read the same name and type
            "ResponseContentType": content_type(PurePosixPath(file_name)),
            "ResponseContentDisposition": attachment(file_name),
        }
        return self.client.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_sec)

    def fetch(self, key: str, dest: Path) -> Path:
        dest.parent.mkdir(parents=True, exist_ok=True)
        self.stat(key)
        self.client.download_file(self.bucket, self._object(key), str(dest), Config=self.transfer)
        return dest

    # helpers

    def _root(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""

    def _name(self, key: str) -> str:
        cleaned = clean_key(key)
        if cleaned is None:
            raise InputError(f"invalid storage key {key!r}: use a relative path without '.' or '..' parts")
        return self._root() + _object_of(cleaned)

    def _object(self, key: str) -> str:
        """The object name of a file key; NotFoundError for a key that names nothing."""
        cleaned = clean_key(key)
        if cleaned is None or cleaned.endswith("/" + TOUCHED):
            raise not_found(key)
        return self._root() + _object_of(cleaned)

    def _uploads_of(self, collection: str) -> Iterator[StoredUpload]:
        newest: dict[str, float] = {}
        base = f"{self._root()}{collection}/{UPLOADS_OBJECT}/"
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base):
            for item in page.get("Contents", []):
                upload_id = item["Key"][len(base) :].split("/", 1)[0]
                if UPLOAD_ID.match(upload_id):
                    changed = item["LastModified"].timestamp()
                    newest[upload_id] = max(newest.get(upload_id, 0.0), changed)
        for upload_id, changed in sorted(newest.items()):
            yield StoredUpload(collection, upload_id, changed)

    def _call(self, method: str, missing: str | None = None, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, method)(**kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if missing is not None and code in _MISSING:
                raise not_found(missing) from None
            raise PierError(
                f"object storage {self.url}: {method} failed ({code or exc}): check the bucket, "
                "AWS_ENDPOINT_URL and the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
            ) from None


def _object_of(key: str) -> str:
    """The object name of a key: `<collection>/.uploads/...` is stored as `<collection>/.pier-uploads/...`."""
    return _swap_second(key, UPLOADS, UPLOADS_OBJECT)


def _key_of(name: str) -> str:
    return _swap_second(name, UPLOADS_OBJECT, UPLOADS)


def _swap_second(path: str, old: str, new: str) -> str:
    parts = path.split("/")
    if len(parts) > 1 and parts[1] == old:
        parts[1] = new
    return "/".join(parts)


def _regular_files(folder: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(folder):  # does not follow symlinked dirs
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                yield path
