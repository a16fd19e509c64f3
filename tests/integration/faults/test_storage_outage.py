"""Outputs under a storage fault: the run's S3 server (SeaweedFS of the
test's own) is killed while save uploads a 100 MB result, and started again
10 s later. Save keeps the outputs on this host and tries again; the run
completes with every file its record lists stored whole, its run.json, and no
incomplete multipart upload left."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from tests.support.api_server import Server, make_collection
from tests.support.fleet import FAKE_BACKEND, REPO, wait_for
from tests.support.private import SeaweedFS

from pier.db import Store

pytestmark = pytest.mark.integration

RESULT_MB = 100
DOWN_SEC = 10
# The outage, then the retry's wait (at most 15 s), the upload, the end.
AFTER_OUTAGE_BOUND_SEC = 60


@pytest.fixture(scope="module")
def s3() -> Iterator[SeaweedFS]:
    server = SeaweedFS.create()
    try:
        yield server
    finally:
        server.destroy()


def test_outputs_survive_storage_killed_mid_save(tmp_path: Path, s3: SeaweedFS) -> None:
    home = tmp_path / "home"
    home.mkdir()
    prefix = f"faults-{os.getpid()}-{time.time_ns()}"
    once = tmp_path / "big-written"
    settings = {
        "PIER_SANDBOX_BACKEND": FAKE_BACKEND,
        "PIER_TEST_RESULT_MB": str(RESULT_MB),
        "PIER_TEST_RESULT_ONCE": str(once),
        "PIER_STORAGE_URL": f"s3://{s3.bucket}/{prefix}",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        **s3.env(),
    }
    db_url = f"sqlite:///{home / 'pier.db'}"
    server = Server(home, db_url, settings=settings).start()
    store = Store.open(db_url)
    try:
        collection = make_collection(server, "pier-fake:latest", prefix="s3")
        collection.put_task("t", "echo hi")
        tid = collection.run("t")
        wait_for(lambda: any(e.line.startswith("collected") for e in store.events(tid)), 90, "collected")
        time.sleep(0.3)
        s3.kill()
        time.sleep(DOWN_SEC)
        s3.start()
        record = collection.wait("t", tid, timeout=AFTER_OUTAGE_BOUND_SEC)
        assert record["status"] == "completed", record["error"]
        client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                              aws_access_key_id=s3.ACCESS_KEY, aws_secret_access_key=s3.SECRET_KEY)  # fmt: skip
        outputs = store.get_run(tid).outputs
        sizes = {f.path: f.size for f in outputs.results_files}
        assert sizes.get("big.bin") == RESULT_MB << 20, sizes
        for key in outputs.files:
            stored = client.head_object(Bucket=s3.bucket, Key=f"{prefix}/{key}")["ContentLength"]
            assert stored == sizes[key.rsplit("/results/", 1)[1]], f"{key} stored with {stored} bytes"
        run_prefix = f"{prefix}/{record['storage_path'].strip('/')}"
        client.head_object(Bucket=s3.bucket, Key=f"{run_prefix}/run.json")
        open_uploads = (
            client.list_multipart_uploads(Bucket=s3.bucket, Prefix=f"{prefix}/").get("Uploads") or []
        )
        assert open_uploads == [], f"{len(open_uploads)} incomplete multipart upload(s) left"
        events = [e.line for e in store.events(tid)]
        assert any("trying again" in line for line in events), (
            "the outage was not noticed: the test meant nothing"
        )
        scratch = home / "tmp"
        assert not scratch.exists() or not any(scratch.iterdir()), "scratch left"
    finally:
        store.close()
        server.stop()
        s3.start_if_stopped()
