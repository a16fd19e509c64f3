"""A real S3-compatible server for the storage tests: scripts/start-s3.sh starts
one (SeaweedFS) and prints PIER_TEST_S3_URL and the AWS_* variables to export.
Without it the S3 tests skip, saying so; under CI=true they fail
(tests/support/services.py)."""

from __future__ import annotations

import os
import uuid

from tests.support.services import require_service

S3_ENV = "PIER_TEST_S3_URL"


def s3_base_url() -> str:
    """PIER_TEST_S3_URL (s3://bucket/prefix) once the server it names answers."""
    url = os.environ.get(S3_ENV)
    reason = None
    if not url:
        reason = f"{S3_ENV} is not set: run scripts/start-s3.sh and export what it prints"
    else:
        from pier.storage.s3 import S3Storage

        storage = S3Storage(url)
        try:
            storage.client.head_bucket(Bucket=storage.bucket)
        except Exception as exc:  # any failure: the server is not there to test on
            reason = f"the S3 server of {S3_ENV}={url} does not answer ({exc}): run scripts/start-s3.sh"
    if reason:
        require_service("an S3 server", reason)
    assert url is not None
    return url


def s3_scratch_url() -> str:
    """A fresh prefix of the test bucket, so tests never see each other's objects."""
    return f"{s3_base_url().rstrip('/')}/{uuid.uuid4().hex[:12]}"
