"""Everything pier creates under PIER_HOME is its owner's alone (0600 files, 0700
folders): a local user on the host reads neither the database (logs, the
encrypted environment, token hashes), the stored outputs, the scratch folders
nor the keys. Checked after a real `pier run` and a real `pier serve`."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.api_server import Server, make_collection, runbook

pytestmark = pytest.mark.integration


def readable_by_others(home: Path) -> list[str]:
    found = []
    for path in [home, *home.rglob("*")]:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            continue
        if mode & 0o077:
            found.append(f"{oct(mode & 0o777)} {path.relative_to(home)}")
    return found


def test_pier_run_leaves_nothing_readable_by_other_users(tmp_path: Path, base_image: str):
    home = tmp_path / "home"
    path = tmp_path / "RUNBOOK.md"
    path.write_text(runbook("echo secret-ish > {{results_dir}}/out.txt", snapshot=""))
    env = {**os.environ, "PIER_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "pier.cli", "run", str(path), "--image", base_image],
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (home / "pier.db").exists() and any((home / "storage").rglob("out.txt"))
    assert readable_by_others(home) == []


def test_pier_serve_leaves_nothing_readable_by_other_users(tmp_path: Path, base_image: str):
    home = tmp_path / "serve"
    home.mkdir(mode=0o755)  # a home made by hand, before pier: pier tightens it
    os.chmod(home, 0o755)
    server = Server(home=home, db_url=f"sqlite:///{home / 'pier.db'}").start()
    try:
        collection = make_collection(server, base_image, prefix="perm")
        with collection.client() as c:
            r = c.patch(
                f"/api/v1/collections/{collection.name}/environment",
                json={"environment_variables": {"K": "v"}},
            )
            assert r.status_code in (200, 204), r.text
    finally:
        server.stop()
    server.log_path.unlink()  # the test's own capture of the server's output
    assert (home / "pier.db").exists()
    assert readable_by_others(home) == []
