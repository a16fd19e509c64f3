"""The API refuses what a run may not have with a 422 naming the field or the
file, before anything is stored or expanded: limits past the floor or the
operator's maxima, and zip bombs (run bodies and /sandbox/upload alike)."""

from __future__ import annotations

import io
import zipfile

import pytest
from tests.support.api_server import Collection

pytestmark = pytest.mark.integration

MIB = 1 << 20


def bomb(size: int = 64 * MIB) -> bytes:
    """A zip under 100 KiB that expands to `size` bytes of zeros."""
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf,
        zf.open("zeros.bin", "w") as out,
    ):
        for _ in range(size // MIB):
            out.write(bytes(MIB))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("memory", "0", "at least 32M"),
        ("memory", "10T", "PIER_MAX_MEMORY"),
        ("cpus", -1, "not a number of CPUs"),
        ("timeout_sec", -5, "not a time limit"),
        ("timeout_sec", "abc", "not a time limit"),  # was a 500
    ],
)
def test_a_bad_limit_is_a_422_naming_the_field(collection: Collection, field, value, says):
    collection.put_task("limits", "echo hi > {{results_dir}}/a.txt")
    with collection.client() as c:
        r = c.post(f"/api/v1/run/{collection.name}/limits", json={"init_params": {field: value}})
        listed = c.get(f"/api/v1/db/trajectories/{collection.name}/limits").json()
    assert r.status_code == 422, r.text
    (error,) = r.json()["errors"]
    assert error["field"] == field and says in error["message"]
    assert listed["total"] == 0  # refused, not accepted and failed later


def uploads(collection: Collection) -> list:
    folder = collection.server.home / "storage" / collection.name / ".uploads"
    return list(folder.iterdir()) if folder.is_dir() else []


def test_a_zip_bomb_with_a_run_is_a_422_and_nothing_is_kept(collection: Collection):
    collection.put_task("bomb", "ls /app/assets > {{results_dir}}/a.txt")
    with collection.client() as c:
        r = c.post(
            f"/api/v1/run/{collection.name}/bomb",
            data={"init_params": "{}"},
            files=[("files", ("bomb.zip", bomb()))],
        )
    assert r.status_code == 422, r.text
    (error,) = r.json()["errors"]
    assert error["field"] == "files" and "bomb.zip would expand" in error["message"]
    assert uploads(collection) == []


def test_a_zip_bomb_upload_is_refused_and_not_kept(collection: Collection):
    with collection.client() as c:
        r = c.post("/api/v1/sandbox/upload", files={"files": ("bomb.zip", bomb())})
        fine = c.post("/api/v1/sandbox/upload", files={"files": ("ok.zip", _small_zip())})
    assert r.status_code == 422, r.text
    assert "bomb.zip would expand" in r.json()["errors"][0]["message"]
    assert fine.status_code == 200, fine.text
    assert len(uploads(collection)) == 1  # only the good one


def _small_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("notes.txt", "hello")
    return buffer.getvalue()
