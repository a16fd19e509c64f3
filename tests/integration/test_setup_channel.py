"""Set-up's archive reaches the sandbox through its keep-alive's stdin
(pier.sandbox.docker.keepalive), not through the engine's archive call, which on
Docker 20.10 starts a process of the engine's own binary to unpack every archive,
nor through an exec (gVisor's way before). Seen from the engine: a run's
container events, where `extract-to-dir` is an archive call and `exec_create`
names the command it runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from tests.support.api_server import runbook

pytestmark = pytest.mark.integration

SCRIPT = "cat /app/assets/notes.txt > {{results_dir}}/copy.txt"


def container_events(sandbox_id: str, since: int) -> list[str]:
    """The engine's events of one container since `since`: each action with its
    attributes' command where it has one (`exec_create: sh -c ...`)."""
    done = subprocess.run(
        ["docker", "events", "--since", str(since), "--until", str(int(time.time()) + 1),
         "--filter", f"container={sandbox_id}", "--format", "{{.Action}}"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return done.stdout.splitlines()


def pier_run(folder: Path, image: str, *extra: str) -> dict:
    notes = folder / "notes.txt"
    notes.write_text("meeting notes\n")
    (folder / "RUNBOOK.md").write_text(runbook(SCRIPT, snapshot=""))
    done = subprocess.run(
        [sys.executable, "-m", "pier.cli", "run", str(folder), "--image", image, "--file", str(notes),
         "--json", *extra],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def copied(record: dict, pier_home: Path) -> str:
    path = pier_home / "storage" / record["storage_path"] / "results" / "copy.txt"
    return path.read_text()


def test_set_up_places_the_runs_files_with_no_archive_call_and_no_untar_exec(
    base_image, on_runtime, tmp_path: Path, pier_home: Path
):
    since = int(time.time()) - 1
    record = pier_run(tmp_path, base_image)
    outputs = record["steps"]["run"]["outputs"]
    assert record["status"] == "completed", record.get("error")
    assert copied(record, pier_home) == "meeting notes\n"  # the attached file was in place for the agent
    events = container_events(outputs["sandbox"]["id"], since)
    archive_calls = [e for e in events if e.startswith("extract-to-dir")]
    # gVisor's one archive call is made before the sandbox starts (a file that keeps
    # /tmp on the sandbox's disk: the runtime mounts a tmpfs over an empty one).
    assert len(archive_calls) == (1 if on_runtime == "runsc" else 0), events
    assert not [e for e in events if e.startswith("exec_create") and "tar -x" in e], events


def test_an_image_without_tar_gets_its_files_the_engines_way(
    base_image, docker_backend, tmp_path: Path, pier_home, monkeypatch: pytest.MonkeyPatch
):
    """The keep-alive drains the archive and says it has no tar; set-up then
    sends it with the engine's archive call, and the run goes on as before
    (on runc: gVisor's way in is an exec of tar, which such an image cannot run)."""
    monkeypatch.setenv("PIER_SANDBOX_RUNTIME", "runc")
    tag = f"pier-test/no-tar:{uuid.uuid4().hex[:8]}"
    context = tmp_path / "image"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {base_image}\nRUN rm -f /usr/bin/tar /bin/tar\n")
    subprocess.run(
        ["docker", "build", "-q", "-t", tag, str(context)], check=True, capture_output=True, timeout=300
    )
    try:
        folder = tmp_path / "run"
        folder.mkdir()
        since = int(time.time()) - 1
        record = pier_run(folder, tag)
        assert record["status"] == "completed", record.get("error")
        assert copied(record, pier_home) == "meeting notes\n"
        events = container_events(record["steps"]["run"]["outputs"]["sandbox"]["id"], since)
        assert len([e for e in events if e.startswith("extract-to-dir")]) == 1, events
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)
