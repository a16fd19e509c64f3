"""Uploads nobody used expire: `pier serve`'s periodic sweep deletes them after
PIER_UPLOAD_TTL_SEC, and a run that names one then gets a 422 saying so."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.api_server import STORAGES, Server, make_collection, storage_settings

pytestmark = pytest.mark.integration


@pytest.fixture(params=STORAGES)
def short_lived_uploads(request, tmp_path: Path, docker_backend, base_image) -> Iterator[Server]:
    srv = Server(
        home=tmp_path / "home",
        db_url=f"sqlite:///{tmp_path / 'pier.db'}",
        settings={
            "PIER_UPLOAD_TTL_SEC": "1",
            "PIER_SWEEP_INTERVAL_SEC": "0.5",
            **storage_settings(request.param),
        },
    )
    (tmp_path / "home").mkdir()
    yield srv.start()
    srv.stop()


def wait_gone(c: httpx.Client, path: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while (status := c.get(f"/api/v1/file/{path}").status_code) != 404:
        assert status == 200, status
        assert time.monotonic() < deadline, f"{path} still there after {timeout}s"
        time.sleep(0.2)


def test_an_unused_upload_expires_and_a_run_naming_it_is_told(short_lived_uploads, base_image):
    server = short_lived_uploads
    collection = make_collection(server, base_image, prefix="uploads")
    collection.put_task("t", "cat /app/assets/data.csv > {{results_dir}}/out.txt")
    with collection.client() as c:
        r = c.post("/api/v1/sandbox/upload", files={"files": ("data.csv", b"a,b\n")})
        assert r.status_code == 200, r.text
        (path,) = r.json()["file_paths"]
        assert c.get(f"/api/v1/file/{path}").content == b"a,b\n"

        wait_gone(c, path)

        r = c.post(f"/api/v1/run/{collection.name}/t", json={"init_params": {"file_paths": [path]}})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert path in detail and "expired" in detail and "/sandbox/upload" in detail
    assert "deleted upload" in server.log_tail(200)
