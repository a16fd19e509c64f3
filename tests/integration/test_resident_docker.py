"""`pier run` handed to the resident process (pier.launch) on Docker: the run is
the same as in its own process (its outputs saved, exit 0, its sandbox gone),
and Ctrl-C on the client cancels it and deletes its sandbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.api_server import runbook as script_runbook
from tests.support.resident import serving

pytestmark = pytest.mark.integration

SCRIPT = """echo "first line"
for i in $(seq 1 {ticks}); do echo "tick $i"; sleep 0.5; done
echo hello > {{{{results_dir}}}}/out.txt"""


@pytest.fixture
def env(pier_home: Path, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PIER_HOME": str(pier_home), "PIER_RESIDENT": "true",
            "PIER_RESIDENT_DIR": str(tmp_path / "resident")}  # fmt: skip


@pytest.fixture
def resident(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    with serving(env) as process:
        yield process


def runbook(tmp_path: Path, ticks: int) -> Path:
    path = tmp_path / "RUNBOOK.md"
    path.write_text(script_runbook(SCRIPT.format(ticks=ticks), snapshot=""))
    return path


def sandboxes_of(trajectory_id: str) -> list[str]:
    found = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=pier.run={trajectory_id}"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return found.stdout.split()


def test_a_run_handed_to_the_resident_runs_on_docker(env, resident, base_image, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pier.launch", "run", str(runbook(tmp_path, 1)), "--image", base_image, "--json"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)
    assert record["status"] == "completed"
    saved = Path(env["PIER_HOME"]) / "storage" / record["storage_path"] / "results" / "out.txt"
    assert saved.read_text() == "hello\n"
    assert sandboxes_of(record["trajectory_id"]) == []


def test_ctrl_c_cancels_the_handed_run_and_deletes_its_sandbox(env, resident, base_image, tmp_path):
    with subprocess.Popen(
        [sys.executable, "-m", "pier.launch", "run", str(runbook(tmp_path, 60)), "--image", base_image],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ) as process:  # fmt: skip
        assert process.stdout is not None
        for line in process.stdout:
            if "tick 1" in line:
                break
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=120)
    assert process.returncode == 130, rest
    runs = subprocess.run([sys.executable, "-m", "pier.cli", "runs", "--json"], env=env,
                          capture_output=True, text=True, check=True).stdout.splitlines()  # fmt: skip
    record = json.loads(runs[0])
    assert record["status"] == "cancelled"
    assert sandboxes_of(record["trajectory_id"]) == []
