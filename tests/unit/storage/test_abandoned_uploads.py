"""A multipart upload left open (a worker killed mid-save, an abort that
failed during an outage) keeps its parts stored, and billed, for ever: the
server's periodic sweep aborts those begun longer ago than
PIER_STORAGE_ABANDONED_UPLOAD_SEC, on a real S3 server, and leaves a recent
one (a save in progress) alone."""

from __future__ import annotations

import time

from tests.support.s3 import s3_scratch_url

from pier.db import Store
from pier.lifecycle.background import PeriodicSweeper
from pier.sandbox.fake import FakeBackend
from pier.settings import Settings
from pier.storage.s3 import S3Storage


def open_uploads(storage: S3Storage) -> list[str]:
    found = storage.client.list_multipart_uploads(Bucket=storage.bucket, Prefix=storage._root())
    return [u["Key"] for u in found.get("Uploads") or []]


def begin_upload(storage: S3Storage, key: str) -> None:
    name = storage._name(key)
    started = storage.client.create_multipart_upload(Bucket=storage.bucket, Key=name)
    storage.client.upload_part(Bucket=storage.bucket, Key=name, UploadId=started["UploadId"], PartNumber=1,
                               Body=b"x" * (5 << 20))  # fmt: skip


def test_the_sweep_aborts_abandoned_multipart_uploads_and_keeps_recent_ones(tmp_path):
    storage = S3Storage(s3_scratch_url())
    begin_upload(storage, "team/t/" + "a" * 32 + "/results/big.bin")
    assert len(open_uploads(storage)) == 1
    assert storage.abort_abandoned_uploads(older_than_sec=3600) == 0, "a save in progress is left alone"
    assert len(open_uploads(storage)) == 1
    time.sleep(1.5)
    settings = Settings(home=tmp_path, storage_url=storage.url, storage_abandoned_upload_sec=1,
                        sandbox_backend="fake")  # fmt: skip
    with Store.open(settings.db_url) as store:
        sweeper = PeriodicSweeper(lambda: FakeBackend(settings), store, settings, storage)
        sweeper._sweep()  # one round, as the server's thread runs it
    assert open_uploads(storage) == []
