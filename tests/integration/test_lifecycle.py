"""The whole life of a run on a real Docker engine, with the script agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
import zipfile
from pathlib import Path

import pytest
from tests.support.runs import run_folder

from pier.lifecycle.start import RunRequest, Services, run
from pier.record import Trajectory
from pier.runbook import parse
from pier.sandbox.base import LABEL_RUN
from pier.settings import get_settings
from pier.tasks import step_override, task_from_runbook

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def runbook(script: str, **front: object) -> str:
    front.setdefault("agent", "script")
    front.setdefault("snapshot", "")
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    return "---\n" + "\n".join(lines) + f"\n---\n# test\n\n```bash\n{script}\n```\n"


def start(text: str, params: dict | None = None, env: dict | None = None, **step: object) -> Trajectory:
    task = task_from_runbook(parse(text))
    if step:
        task = task.model_copy(update={"step_configs": {"run": step_override(task.run_step(), **step)}})
    request = RunRequest(collection="tests", task_name="t", task=task, run_params=params or {}, env=env or {})
    return run(Services(get_settings()), request)


def on_image(image: str) -> dict:
    return {"snapshot": "", "image": image}


def sandboxes_of(backend, trajectory_id: str) -> list:
    return [s for s in backend.list_sandboxes() if s.labels.get(LABEL_RUN) == trajectory_id]


def events(trajectory_id: str) -> list[str]:
    return [e.line for e in Services(get_settings()).store.events(trajectory_id)]


def test_hello_example_end_to_end_through_the_cli(base_image, docker_backend, on_runtime):
    proc = subprocess.run(
        [sys.executable, "-m", "pier.cli", "run", str(REPO / "examples" / "hello"), "--json"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PIER_BASE_IMAGE": base_image},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(proc.stdout)
    assert record["status"] == "completed" and record["steps"]["run"]["outputs"]["success"] is True
    # The fields people reach for first, then the platform's Trajectory, as the API
    # serves it: the same fields, the same model (`--raw`: the trajectory alone).
    head = {"id", "status", "success", "collection", "task", "created", "duration_seconds"}
    assert set(list(record)[:7]) == head
    assert record["id"] == record["trajectory_id"] and record["success"] is True
    trajectory = {k: v for k, v in record.items() if k not in ("id", "success", "task")}
    assert set(trajectory) == set(Trajectory.model_json_schema(mode="serialization")["properties"])
    assert Trajectory.model_validate(trajectory).model_dump(mode="json") == trajectory
    assert record["error"] is None and record["total_steps"] == record["completed_steps"] == ["run"]
    run_step = record["steps"]["run"]
    assert run_step["activity"] == "runbook" and run_step["outputs"]["agent"] == "script"
    key = f"{record['collection']}/{record['name']}/{record['trajectory_id']}/results/hello.md"
    assert run_step["outputs"]["files"][0] == key and run_step["outputs"]["results_files"][0]["key"] == key
    assert record["steps"]["run"]["outputs"]["primary_files"] == ["hello.md"]
    assert record["steps"]["run"]["outputs"]["results_files"][0]["path"] == "hello.md"
    hello = run_folder(record) / "results" / "hello.md"
    assert hello.read_text().startswith("# Hello, world!")
    assert "Hello, world!" in (run_folder(record) / "logs" / "agent.log").read_text()
    assert [s["status"] for s in record["steps"]["run"]["outputs"]["stages"]].count("completed") >= 7
    assert not sandboxes_of(docker_backend, record["trajectory_id"])


def test_vars_files_and_zip_extraction(base_image, tmp_path):
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("inner/a.txt", "alpha")
    note = tmp_path / "note.txt"
    note.write_text("plain")
    text = runbook("cat /app/assets/inner/a.txt /app/assets/note.txt > {{results_dir}}/out.txt\n"
                   "echo {{topic}} >> {{results_dir}}/out.txt\nls /app/assets > {{results_dir}}/ls.txt")  # fmt: skip
    record = start(
        text, {**on_image(base_image), "vars": {"topic": "rust"}, "file_paths": [str(archive), str(note)]}
    )
    assert record.success, record.error
    out = run_folder(record) / "results"
    assert (out / "out.txt").read_text() == "alphaplainrust\n"
    assert (out / "ls.txt").read_text().split() == ["inner", "note.txt"]
    assert (run_folder(record) / "assets" / "inner" / "a.txt").read_text() == "alpha"


def test_zip_slip_is_rejected_before_any_sandbox(base_image, tmp_path, docker_backend):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("../../etc/evil", "x")
    collection = f"zipslip-{uuid.uuid4().hex[:8]}"
    seen: list = []
    watching = threading.Event()

    def watch() -> None:  # any sandbox of this collection, even short-lived, is a failure
        while not watching.is_set():
            seen.extend(
                s for s in docker_backend.list_sandboxes() if s.labels.get("pier.collection") == collection
            )
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pier.cli", "run", str(write(tmp_path, runbook("true"))),
             "--image", base_image, "--file", str(archive), "--collection", collection],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        watching.set()
        watcher.join()
    assert proc.returncode == 2
    assert "evil.zip" in proc.stderr and "outside /app/assets" in proc.stderr
    assert not seen


def write(folder: Path, text: str) -> Path:
    path = folder / "RUNBOOK.md"
    path.write_text(text)
    return path


def test_concurrent_runs_cannot_see_each_other(base_image):
    script = (
        "echo {{me}} > /tmp/marker-{{me}}\n"
        "(exec -a sleeper-{{me}} sleep 30) &\n"
        "sleep 3\n"
        "ls /tmp > {{results_dir}}/tmp.txt\n"
        "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' > {{results_dir}}/procs.txt\n"
        "kill %1"
    )
    records: dict[str, Trajectory] = {}

    def go(me: str) -> None:
        records[me] = start(runbook(script), {**on_image(base_image), "vars": {"me": me}})

    threads = [threading.Thread(target=go, args=(name,)) for name in ("aaa", "bbb")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    for me, other in (("aaa", "bbb"), ("bbb", "aaa")):
        record = records[me]
        assert record.success, record.error
        results = run_folder(record) / "results"
        assert f"marker-{me}" in (results / "tmp.txt").read_text()
        assert f"marker-{other}" not in (results / "tmp.txt").read_text()
        procs = (results / "procs.txt").read_text()
        assert f"sleeper-{me}" in procs and f"sleeper-{other}" not in procs
    assert records["aaa"].outputs.sandbox.id != records["bbb"].outputs.sandbox.id


def test_generated_dockerfile_with_packages_is_built_once(base_image):
    text = runbook(
        "jq --version > {{results_dir}}/jq.txt\npython3 -c 'import six; print(six.__version__)' > {{results_dir}}/six.txt",
        apt_packages=["jq"], pip_packages=["six"], base_image=base_image,
    )  # fmt: skip
    first = start(text)
    assert first.success, first.error
    assert first.outputs.sandbox.source == "dockerfile"
    assert "jq-" in (run_folder(first) / "results" / "jq.txt").read_text()
    second = start(text)
    assert second.success, second.error
    assert second.outputs.sandbox.image == first.outputs.sandbox.image
    lines = events(second.trajectory_id)
    assert f"Using cached image {second.outputs.sandbox.image}" in lines, (
        "the second run reuses the built image"
    )
    assert not any(line.startswith("Step ") for line in lines), "and builds nothing"


def test_unknown_snapshot_falls_through_to_image(base_image):
    record = start(
        runbook("echo ok > {{results_dir}}/ok.txt"), {"snapshot": "no-such-snapshot", "image": base_image}
    )
    assert record.success, record.error
    lines = events(record.trajectory_id)
    assert f"Creating sandbox from registry image: {base_image}" in lines
    assert any("no-such-snapshot" in line for line in lines)
    assert record.outputs.sandbox.source == "image"


def test_time_limit_kills_the_agent_and_deletes_the_sandbox(base_image, docker_backend):
    record = start(
        runbook("echo started > {{results_dir}}/a.txt\nsleep 120"), on_image(base_image), timeout_sec=4
    )
    agent = record.stage("run_agent")
    assert agent.duration_seconds < 120, "stopped at its limit, not when the sleep ended"
    assert record.status == "failed" and record.success is False
    assert record.failed_stage == "run_agent" and "timed out after 4 seconds" in record.error
    assert (run_folder(record) / "results" / "a.txt").exists(), "partial results are still collected"
    assert not sandboxes_of(docker_backend, record.trajectory_id)


LEAKY_AGENT = """echo "the key is $PIER_TEST_KEY"
printf '%s' "$PIER_TEST_KEY" > /logs/agent/bare.txt
mkdir -p /logs/agent/deep && printf '{"k": "%s"}\\n' "$PIER_TEST_KEY" > /logs/agent/deep/trace.jsonl
echo done > {{results_dir}}/done.txt"""


def test_a_secret_the_agent_prints_is_in_no_stored_log_file(base_image):
    key = "sk-test-" + uuid.uuid4().hex
    record = start(runbook(LEAKY_AGENT), on_image(base_image), env={"PIER_TEST_KEY": key})
    assert record.success, record.error
    stored = run_folder(record)
    logs = {p.relative_to(stored).as_posix(): p.read_bytes() for p in stored.rglob("*") if p.is_file()}
    logs = {name: data for name, data in logs.items() if not name.startswith("results/")}
    assert {"logs/agent.log", "logs/bare.txt", "logs/deep/trace.jsonl", "run.json"} <= set(logs)
    leaked = [name for name, data in logs.items() if key.encode() in data]
    assert not leaked, f"the secret is stored in {leaked}"
    assert b"the key is ***" in logs["logs/agent.log"], "the log was kept, with the secret masked"
    assert logs["logs/bare.txt"] == b"***"
    assert logs["logs/deep/trace.jsonl"] == b'{"k": "***"}\n'


def test_memory_limit_is_reported_as_oom(base_image):
    script = "python3 -c 'b = bytearray(400 * 1024 * 1024); print(len(b))'\necho done > {{results_dir}}/x"
    record = start(runbook(script), on_image(base_image), memory="96M")
    assert record.status == "failed"
    assert "out of memory" in record.error and "96M" in record.error


def test_empty_results_fail_the_run(base_image, docker_backend):
    record = start(runbook("echo nothing here"), on_image(base_image))
    assert record.status == "failed"
    assert record.failed_stage == "collect" and "nothing in /app/results" in record.error
    assert not sandboxes_of(docker_backend, record.trajectory_id)


def test_failing_block_stops_the_script(base_image):
    record = start(
        runbook("echo a > {{results_dir}}/a\nfalse\necho b > {{results_dir}}/b"), on_image(base_image)
    )
    assert record.status == "failed" and "exited with code 1" in record.error
    assert [f.path for f in record.outputs.results_files] == ["a"]


def test_network_off_blocks_outbound_and_on_allows_it(base_image):
    script = "if curl -sS -o /dev/null --max-time 10 https://pypi.org/simple/six/; then echo open; else echo blocked; fi > {{results_dir}}/net.txt"
    closed = start(runbook(script), on_image(base_image), network_enabled=False)
    assert closed.success, closed.error
    assert (run_folder(closed) / "results" / "net.txt").read_text().strip() == "blocked"
    opened = start(runbook(script), on_image(base_image))
    assert (run_folder(opened) / "results" / "net.txt").read_text().strip() == "open"


def test_sweep_removes_the_sandbox_of_a_killed_cli(base_image, tmp_path, docker_backend):
    path = write(tmp_path, runbook("sleep 300"))
    collection = f"sweep-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pier.cli", "run", str(path), "--image", base_image, "--json", "--collection", collection],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    sandbox = None
    for _ in range(240):
        found = [s for s in docker_backend.list_sandboxes() if s.labels.get("pier.collection") == collection]
        if found:
            sandbox = found[0]
            break
        time.sleep(0.5)
    assert sandbox is not None, "the run never created its sandbox"
    proc.kill()
    proc.wait(10)
    sweep = subprocess.run(
        [sys.executable, "-m", "pier.cli", "sweep"], capture_output=True, text=True, timeout=120
    )
    assert sweep.returncode == 0, sweep.stderr
    assert sandbox.id[:12] in sweep.stdout
    assert all(s.id != sandbox.id for s in docker_backend.list_sandboxes())
