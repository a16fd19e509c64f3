"""The CLI's read-side commands against real runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.api_server import STORAGES, storage_settings

from pier.settings import get_settings
from pier.storage import open_storage

pytestmark = pytest.mark.integration

SLOW_RUNBOOK = """---
agent: script
snapshot: ""
---
```bash
for i in 1 2 3 4 5; do echo "tick $i"; sleep 1.5; done  # running for 7 s: seen by a `pier runs` poll under load
echo done > {{results_dir}}/out.txt
```
"""


def pier(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_logs_follow_streams_a_live_run_until_it_ends(base_image, tmp_path: Path):
    runbook = tmp_path / "RUNBOOK.md"
    runbook.write_text(SLOW_RUNBOOK)
    run = subprocess.Popen(
        [sys.executable, "-m", "pier.cli", "run", str(runbook), "--image", base_image, "--json"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    trajectory_id = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # the run appears in `pier runs` while it is going
        records = [json.loads(line) for line in pier("runs", "--json").stdout.splitlines()]
        running = [r for r in records if r["status"] == "running"]
        if running:
            trajectory_id = running[0]["trajectory_id"]
            break
        time.sleep(0.2)
    assert trajectory_id, "the run never showed as running in `pier runs`"
    follow = pier("logs", trajectory_id, "--follow", timeout=180)  # returns when the run ends
    stdout, _ = run.communicate(timeout=180)
    assert follow.returncode == 0
    lines = follow.stdout.splitlines()
    ticks = [line for line in lines if "tick" in line]
    assert [t.split()[-1] for t in ticks] == ["1", "2", "3", "4", "5"]
    assert lines[-1].endswith(f"run completed in {json.loads(stdout)['duration_seconds']:.1f}s")
    table = pier("runs").stdout
    assert trajectory_id in table and "completed" in table


def test_logs_of_unknown_run_fails_clearly():
    result = pier("logs", "0" * 32)
    assert result.returncode == 1
    assert "not found" in result.stderr


def test_snapshot_list_names_the_builtins(docker_backend):
    result = pier("snapshot", "list")
    assert result.returncode == 0, result.stderr
    assert "python312-uv" in result.stdout and "prism-playwright" in result.stdout


@pytest.mark.parametrize("storage", STORAGES)
def test_run_publishes_its_outputs_to_the_configured_storage(
    storage, base_image, tmp_path: Path, monkeypatch
):
    """`pier run` works in a scratch folder and publishes once: the outputs and
    run.json are in the storage PIER_STORAGE_URL names, and nothing stays in scratch."""
    for name, value in storage_settings(storage).items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    runbook = tmp_path / "RUNBOOK.md"
    runbook.write_text(SLOW_RUNBOOK.replace("for i in 1 2 3 4 5", "for i in 1"))
    done = pier("run", str(runbook), "--image", base_image, "--json", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)
    stored = open_storage(get_settings().storage_location)
    prefix = record["storage_path"]
    keys = {f.key for f in stored.files(prefix)}
    assert {f"{prefix}/results/out.txt", f"{prefix}/run.json"} <= keys
    assert record["steps"]["run"]["outputs"]["files"] == [f"{prefix}/results/out.txt"]
    with stored.open(f"{prefix}/results/out.txt") as stream:
        assert stream.read() == b"done\n"
    with stored.open(f"{prefix}/run.json") as stream:
        assert json.loads(stream.read())["status"] == "completed"
    assert not any(get_settings().scratch_root.iterdir())


def test_odd_file_names_are_shown_by_the_one_rule_in_the_cli(base_image, tmp_path: Path):
    """A run whose results are named with invalid UTF-8, a newline and a
    terminal escape: `pier run`, `pier runs` and `pier logs` answer, and print
    the names percent-encoded (pier.names.file_name), never the raw bytes."""
    from pier.names import file_name

    names = [b"\xff\xfe", b"two\nlines", b"esc\x1b[31mred"]

    def octal(raw: bytes) -> str:
        return "".join(f"\\{b:03o}" for b in raw)

    made = "\n".join(
        f'n="$(printf "{octal(raw)}_")"; echo x > "{{{{results_dir}}}}/${{n%_}}"; ls {{{{results_dir}}}}'
        for raw in names
    )
    runbook = tmp_path / "RUNBOOK.md"
    runbook.write_text(f'---\nagent: script\nsnapshot: ""\n---\n```bash\n{made}\n```\n')
    run = subprocess.run(
        [sys.executable, "-m", "pier.cli", "run", str(runbook), "--image", base_image],
        capture_output=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    listing = pier("runs", "--json")
    assert listing.returncode == 0, listing.stderr
    record = json.loads(listing.stdout.splitlines()[0])
    files = record["steps"]["run"]["outputs"]["files"]
    for raw in names:
        assert any(f.endswith("/" + file_name(raw)) for f in files), (raw, files)
    for out in (
        run.stdout,
        pier("runs").stdout.encode(),
        pier("logs", record["trajectory_id"]).stdout.encode(),
    ):
        assert b"\xff" not in out and b"\x1b[31m" not in out
