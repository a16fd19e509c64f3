"""The fleet on object storage: a run executed by a `pier worker` puts its
outputs in the bucket every host reaches, and a `pier serve` on another home
(no local copy of anything) serves its result file and its zip from there.
Needs the S3 server of scripts/start-s3.sh (PIER_TEST_S3_URL): skipped without
it, failed under CI=true."""

from __future__ import annotations

import io
import json
import zipfile

from tests.support.api_server import Server, make_collection
from tests.support.fleet import FAKE_BACKEND, Fleet
from tests.support.s3 import s3_scratch_url

from pier.record import storage_key
from pier.storage.s3 import S3Storage


def test_a_workers_outputs_are_in_object_storage_and_another_home_serves_them(fleet: Fleet, tmp_path) -> None:
    url = s3_scratch_url()
    fleet.settings.update({"PIER_SANDBOX_BACKEND": FAKE_BACKEND, "PIER_STORAGE_URL": url})
    collection = make_collection(fleet.server(), "pier-fake:latest", prefix="fleet")
    collection.put_task("t", "echo hi")
    fleet.worker("w1")
    tid = collection.run("t")
    record = collection.wait("t", tid, timeout=90)
    assert record["status"] == "completed", record["error"]

    run_key = storage_key(collection.name, "t", tid)
    stored = {f.key for f in S3Storage(url).files(run_key)}
    assert f"{run_key}/results/out.txt" in stored, f"the worker's outputs are not in the bucket: {stored}"

    elsewhere = Server(tmp_path / "elsewhere", fleet.db_url, settings=fleet.env())
    (tmp_path / "elsewhere").mkdir()
    fleet.servers.append(elsewhere.start())
    assert not list(elsewhere.home.rglob("out.txt")), "the other server's home has no copy of the outputs"
    with elsewhere.client(collection.token) as c:
        result = c.get(f"/api/v1/file/{run_key}/results/out.txt")
        zipped = c.get(f"/api/v1/trajectory/{collection.name}/t/{tid}/download")
    assert result.status_code == 200 and result.content == b"done\n", result.text
    assert zipped.status_code == 200, zipped.text
    archive = zipfile.ZipFile(io.BytesIO(zipped.content))
    assert archive.read("results/out.txt") == b"done\n"
    assert json.loads(archive.read("run.json"))["status"] == "completed"
