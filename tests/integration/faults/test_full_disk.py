"""The embedded server (`pier serve`, in-process runs, SQLite, local storage)
with PIER_HOME on a small filesystem (a 100 MB tmpfs) and a run whose results
would not fit: the run fails early, saying the scratch disk has no room for
them; no scratch folder is left; the next run works; the server restarts."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.api_server import Server, make_collection
from tests.support.fleet import FAKE_BACKEND, REPO
from tests.support.private import DATA_PREFIX
from tests.support.services import require_service

pytestmark = pytest.mark.integration

DISK_MB = 100
RESULT_MB = 150  # more than the disk holds
RUN_BOUND_SEC = 60  # a run writing RESULT_MB on the fake backend ends within this


@pytest.fixture(scope="module")
def small_disk() -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        require_service("a small filesystem", "the full-disk test mounts a tmpfs: run as root")
    mount = Path(f"{DATA_PREFIX}disk-{os.getpid()}")
    mount.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        shutil.rmtree(mount, ignore_errors=True)


def test_a_run_too_big_for_the_disk_fails_early_naming_it_and_the_server_carries_on(small_disk: Path) -> None:
    home = small_disk / "home"
    home.mkdir()
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    settings = {
        "PIER_SANDBOX_BACKEND": FAKE_BACKEND,
        "PIER_TEST_RESULT_MB": str(RESULT_MB),  # the first run's result; the others write a line
        "PIER_TEST_RESULT_ONCE": str(small_disk.parent / f"{small_disk.name}.big-written"),
        "PIER_DISK_RESERVE_BYTES": str(16 << 20),
        "PYTHONPATH": pythonpath,
    }
    server = Server(home, f"sqlite:///{home / 'pier.db'}", settings=settings).start()
    try:
        collection = make_collection(server, "pier-fake:latest", prefix="disk")
        collection.put_task("t", "echo hi")
        tid = collection.run("t")
        record = collection.wait("t", tid, timeout=RUN_BOUND_SEC)
        assert record["status"] == "failed", record
        assert record["failed_stage"] == "collect", record
        assert "scratch disk" in record["error"] and "MB free" in record["error"], record["error"]
        scratch = home / "tmp"
        assert not scratch.exists() or not any(scratch.iterdir()), f"scratch left: {list(scratch.iterdir())}"
        # the disk is usable again: the next run works, and so does a restart
        small = collection.run("t")
        assert collection.wait("t", small, timeout=RUN_BOUND_SEC)["status"] == "completed"
        server.stop()
        server.start(port=server.port)
        with collection.client() as c:
            assert c.get("/health/ready").status_code == 200
        after = collection.run("t")
        assert collection.wait("t", after, timeout=RUN_BOUND_SEC)["status"] == "completed"
    finally:
        server.stop()
        Path(settings["PIER_TEST_RESULT_ONCE"]).unlink(missing_ok=True)


def test_a_full_database_disk_makes_the_server_unready_and_says_so(small_disk: Path) -> None:
    """SQLite's disk full: reads still work, so the database "answers"; but
    every write fails. Readiness must say not ready, naming the full disk, and
    a write's 503 must say the disk is full, not that the database is down;
    once there is room again, the server is ready."""
    home = small_disk / "home-full"
    home.mkdir()
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    settings = {"PIER_SANDBOX_BACKEND": FAKE_BACKEND, "PYTHONPATH": pythonpath}
    server = Server(home, f"sqlite:///{home / 'pier.db'}", settings=settings).start()
    filler = small_disk / "filler.bin"
    try:
        with server.client() as c:
            assert c.get("/health/ready").status_code == 200
            with open(filler, "wb") as out:  # the disk, filled to the last byte
                block = b"\0" * (1 << 20)
                try:
                    while True:
                        out.write(block)
                        out.flush()
                except OSError:
                    pass
            ready = c.get("/health/ready")
            assert ready.status_code == 503, ready.text
            assert "disk is full" in ready.json()["database"], ready.json()
            refused = c.post("/api/v1/collections", json={"name": "on-a-full-disk"})
            assert refused.status_code == 503, refused.text
            assert "disk is full" in refused.json()["detail"], refused.json()
            filler.unlink()
            assert c.get("/health/ready").status_code == 200
            assert c.post("/api/v1/collections", json={"name": "room-again"}).status_code == 201
    finally:
        filler.unlink(missing_ok=True)
        server.stop()
