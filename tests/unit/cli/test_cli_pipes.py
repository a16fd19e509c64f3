"""`pier` in pipes and on a terminal, as a real process (the fake sandbox
backend, no Docker): a reader that goes away (`| head`) never changes a run's
outcome or exit code, piped output is never wrapped, a terminal gets tables."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HELLO = str(ROOT / "examples" / "hello")


@pytest.fixture
def env(pier_home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PIER_HOME": str(pier_home),
        "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)])),
        "PIER_SANDBOX_BACKEND": "tests.support.fleet_backend:backend",
        "PIER_TEST_AGENT_LINES": "40",  # a live log long enough to outlast the reader
        "PIER_TEST_LINE_SEC": "0.02",
        "COLUMNS": "80",
    }


def pier(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def last_run(env: dict[str, str]) -> dict:
    lines = pier(env, "runs", "--json", "--limit", "1").stdout.splitlines()
    assert len(lines) == 1, lines
    return json.loads(lines[0])


@pytest.mark.parametrize(("merge", "keep"), [(True, 3), (False, 2)])
def test_a_reader_that_goes_away_changes_nothing(env, merge, keep):
    # `pier run examples/hello 2>&1 | head -3` and `pier run examples/hello | head -2`
    process = subprocess.Popen(
        [sys.executable, "-m", "pier.cli", "run", HELLO],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.DEVNULL,
    )
    assert process.stdout is not None
    read = [process.stdout.readline() for _ in range(keep)]
    process.stdout.close()  # head exits
    code = process.wait(timeout=120)
    assert all(read), read
    record = last_run(env)
    assert (code, record["status"], record["steps"]["run"]["outputs"]["success"]) == (0, "completed", True), (
        record.get("error"),
        code,
    )


def test_piped_output_is_never_wrapped(env, tmp_path):
    env = {**env, "COLUMNS": "40"}  # narrower than every line below
    (tmp_path / "RUNBOOK.md").write_text("---\nagent: script\nsnapshot: ''\ncolour: a-long-unknown-value\n---\n"
                                         "```bash\necho " + "x" * 120 + " > {{results_dir}}/out.txt\n```\n")  # fmt: skip
    ran = pier(env, "run", str(tmp_path))
    assert ran.returncode == 0, ran.stderr
    outputs = [line for line in ran.stdout.splitlines() if "outputs:" in line]
    assert len(outputs) == 1 and outputs[0].rstrip().endswith(last_run(env)["trajectory_id"]), ran.stdout
    validated = pier(env, "validate", str(tmp_path))
    warning = [line for line in validated.stdout.splitlines() if "warning:" in line]
    assert warning and warning[0].rstrip().endswith("(kept, not used)"), validated.stdout


def test_a_terminal_gets_a_table_and_the_whole_id(env):
    assert pier(env, "run", HELLO).returncode == 0
    trajectory_id = last_run(env)["trajectory_id"]
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "pier.cli", "runs"], env=env, stdin=terminal, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    screen = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the process ended and closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    assert process.wait(timeout=30) == 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", screen.decode(errors="replace"))  # colours off
    assert "┃" in text or "│" in text, text  # a table, not tab-separated rows
    assert trajectory_id in text, text  # at 80 columns, the id is not cut
    assert "1 of 1 run(s)" in text
