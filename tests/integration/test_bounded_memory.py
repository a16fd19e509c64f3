"""pier run keeps its memory bounded however large the attachments and results:
both travel as streams (issue: a 1 GB result took 2 GB of RSS). Each test runs a
real `pier run` and reads the process's own peak RSS from the kernel (wait4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from tests.support.api_server import STORAGES, storage_settings

from pier.storage import open_storage

pytestmark = pytest.mark.integration

MIB = 1 << 20
SIZE = 400 * MIB  # quick here, and far above what a bounded process holds
BOUND = 160 * MIB  # python, pier, the docker SDK and a few buffers


def pier_run(runbook: Path, image: str, home: Path, *args: str, env: dict[str, str] | None = None):
    """(record, peak RSS in bytes, seconds) of one `pier run --json`."""
    command = [sys.executable, "-m", "pier.cli", "run", str(runbook), "--image", image, "--json", *args]
    environ = {**os.environ, "PIER_HOME": str(home), **(env or {})}
    began = time.monotonic()
    with open(home / "stdout", "wb") as out, open(home / "stderr", "wb") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, env=environ)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - began
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = (home / "stdout").read_text()
    assert text.strip(), f"pier run printed no record: {(home / 'stderr').read_text()[-2000:]}"
    return json.loads(text), usage.ru_maxrss * 1024, seconds


def zeros_zip(path: Path, size: int) -> Path:
    """A zip of one file of zeros, written in chunks."""
    with (
        zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf,
        zf.open("zeros.bin", "w", force_zip64=True) as out,
    ):
        for _ in range(size // MIB):
            out.write(bytes(MIB))
    return path


def write_runbook(folder: Path, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "RUNBOOK.md"
    path.write_text(f'---\nagent: script\nsnapshot: ""\n---\n```bash\n{script}\n```\n')
    return path


@pytest.mark.parametrize("storage", STORAGES)
def test_collecting_and_publishing_large_results_keeps_memory_bounded(storage, base_image, tmp_path):
    """Collected into scratch, then published: moved into the local folder, or
    sent to S3 as a multipart upload streamed from disk."""
    runbook = write_runbook(tmp_path / "rb", f"head -c {SIZE} /dev/urandom > {{{{results_dir}}}}/big.bin")
    settings = storage_settings(storage)
    record, peak, seconds = pier_run(runbook, base_image, tmp_path, env=settings)
    assert record["status"] == "completed", record["error"]
    stored = open_storage(settings.get("PIER_STORAGE_URL") or (tmp_path / "storage").as_uri())
    assert stored.stat(f"{record['storage_path']}/results/big.bin").size == SIZE
    print(f"collect + publish {SIZE // MIB} MiB to {storage}: peak RSS {peak / MIB:.0f} MiB, {seconds:.1f}s")
    assert peak < BOUND, f"pier run peaked at {peak / MIB:.0f} MiB collecting {SIZE // MIB} MiB"


def test_placing_a_large_attachment_keeps_memory_bounded(base_image, tmp_path):
    archive = zeros_zip(tmp_path / "zeros.zip", SIZE)
    runbook = write_runbook(tmp_path / "rb", "stat -c %s {{assets_dir}}/zeros.bin > {{results_dir}}/size.txt")
    roomy = {"PIER_MAX_ZIP_RATIO": "100000", "PIER_MAX_ASSET_FILE_BYTES": str(SIZE)}
    record, peak, seconds = pier_run(runbook, base_image, tmp_path, "--file", str(archive), env=roomy)
    assert record["status"] == "completed", record["error"]
    size = (tmp_path / "storage" / record["storage_path"] / "results" / "size.txt").read_text().strip()
    assert size == str(SIZE)
    print(f"place {SIZE // MIB} MiB: peak RSS {peak / MIB:.0f} MiB, {seconds:.1f}s")
    assert peak < BOUND, f"pier run peaked at {peak / MIB:.0f} MiB placing {SIZE // MIB} MiB"


def test_a_zip_bomb_is_refused_before_any_sandbox(base_image, tmp_path):
    bomb = zeros_zip(tmp_path / "bomb.zip", 64 * MIB)
    runbook = write_runbook(tmp_path / "rb", "echo never > {{results_dir}}/a.txt")
    result = subprocess.run(
        [sys.executable, "-m", "pier.cli", "run", str(runbook), "--image", base_image, "--file", str(bomb)],
        capture_output=True, text=True, env={**os.environ, "PIER_HOME": str(tmp_path / "home")}, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "bomb.zip would expand" in " ".join(result.stderr.split())
    assert not (tmp_path / "home" / "storage").exists()  # nothing was written


def test_outputs_past_the_limit_fail_the_run_at_collect(base_image, tmp_path):
    script = "for n in 1 2 3; do head -c 1048576 /dev/urandom > {{results_dir}}/part$n.bin; done"
    runbook = write_runbook(tmp_path / "rb", script)
    limit = {"PIER_MAX_OUTPUT_BYTES": str(2 * MIB + MIB // 2)}  # the agent log is small
    record, _, _ = pier_run(runbook, base_image, tmp_path, env=limit)
    assert record["status"] == "failed" and record["failed_stage"] == "collect", record["error"]
    assert "PIER_MAX_OUTPUT_BYTES" in record["error"]
    kept = sorted(p.name for p in (tmp_path / "storage" / record["storage_path"] / "results").iterdir())
    assert kept == ["part1.bin", "part2.bin"]  # part3.bin was never written
