"""Runs that know their deadline, and sandboxes that outlive one agent exit
(keep, continue, snapshot), on a real Docker engine with the script agent."""

from __future__ import annotations

import time

import pytest
from tests.integration.test_lifecycle import on_image, runbook, sandboxes_of, start
from tests.support.runs import run_folder

pytestmark = pytest.mark.integration

GRACEFUL = """echo "deadline=$PIER_DEADLINE now=$(date +%s)" > {{results_dir}}/deadline.txt
trap 'echo "wrapped up at $(date +%s)" > {{results_dir}}/grace.txt; echo "agent: wrapping up"; exit 0' TERM
echo started
sleep 120 &
wait"""


def test_the_agent_knows_its_deadline_and_what_it_writes_in_the_grace_is_collected(
    base_image, docker_backend, monkeypatch
):
    monkeypatch.setenv("PIER_KILL_GRACE_SEC", "20")
    began = time.time()
    record = start(runbook(GRACEFUL), on_image(base_image), timeout_sec=4)
    assert record.status == "failed" and record.failed_stage == "run_agent"
    assert "timed out after 4 seconds" in record.error and "SIGTERM" in record.error
    results = run_folder(record) / "results"
    seen = dict(part.split("=") for part in (results / "deadline.txt").read_text().split())
    assert 3 <= int(seen["deadline"]) - int(seen["now"]) <= 4, seen
    assert abs(int(seen["deadline"]) - (began + 4)) < 30
    grace = results / "grace.txt"
    assert grace.exists(), "what the agent wrote after SIGTERM was not collected"
    assert int(grace.read_text().split()[-1]) >= int(seen["deadline"]) - 1
    assert record.stage("run_agent").duration_seconds < 20, "the exec waited out the grace for nothing"
    log = (run_folder(record) / "logs" / "agent.log").read_text()
    assert "agent: wrapping up" in log, "what the agent printed in its grace is not in its log"
    assert not sandboxes_of(docker_backend, record.trajectory_id)


def test_an_agent_that_ignores_sigterm_is_killed_when_its_grace_is_over(base_image, monkeypatch):
    monkeypatch.setenv("PIER_KILL_GRACE_SEC", "3")
    record = start(runbook("trap '' TERM\nwhile :; do sleep 0.2; done"), on_image(base_image), timeout_sec=2)
    assert record.failed_stage == "run_agent" and "timed out" in record.error
    assert 5 <= record.stage("run_agent").duration_seconds < 15


# --- keep and continue ---------------------------------------------------------

from pier.lifecycle.background import sweep_once  # noqa: E402
from pier.lifecycle.start import RunRequest, Services, run  # noqa: E402
from pier.runbook import parse  # noqa: E402
from pier.settings import get_settings  # noqa: E402
from pier.tasks import task_from_runbook  # noqa: E402

FIRST = """mkdir -p /opt/tool && printf '#!/bin/sh\\necho tool-v1\\n' > /opt/tool/run && chmod +x /opt/tool/run
echo "from the first run" > /app/state.txt
echo first > {{results_dir}}/first.txt"""
SECOND = """cat /app/state.txt > {{results_dir}}/seen.txt
/opt/tool/run >> {{results_dir}}/seen.txt
ls -A /run/pier > {{results_dir}}/pier-files.txt
ls /logs/agent > {{results_dir}}/old-logs.txt"""


def go(script: str, collection: str = "tests", **params: object):
    task = task_from_runbook(parse(runbook(script)))
    request = RunRequest(collection=collection, task_name="t", task=task, run_params=params)
    return run(Services(get_settings()), request)


def test_keep_then_continue_sees_the_first_runs_files_and_tools(base_image, docker_backend):
    first = go(FIRST, keep_sandbox=True, **on_image(base_image))
    assert first.success, first.error
    kept = first.outputs.sandbox
    assert kept.kept_until is not None and kept.kept_until > time.time() + 1000
    assert [s.running for s in docker_backend.list_sandboxes() if s.id == kept.id] == [True]
    sandbox = docker_backend.attach(kept.id)
    between = sandbox.exec("ls -A /run/pier 2>&1", workdir="/").output
    assert "No such file" in between, f"pier's files stayed in the kept sandbox: {between!r}"
    second = go(SECOND, continue_from=first.trajectory_id, **on_image(base_image))
    try:
        assert second.success, second.error
        assert second.parent == first.trajectory_id and second.outputs.sandbox.id == kept.id
        seen = (run_folder(second) / "results" / "seen.txt").read_text()
        assert seen == "from the first run\ntool-v1\n"
        assert (run_folder(second) / "results" / "old-logs.txt").read_text().split() == ["agent.log"]
        assert not sandboxes_of(docker_backend, first.trajectory_id), "the second run did not delete it"
    finally:
        docker_backend.remove(kept.id)


def test_continue_is_refused_when_the_sandbox_is_in_use_gone_expired_or_another_collections(
    base_image, docker_backend, monkeypatch
):
    first = go(FIRST, keep_sandbox=True, **on_image(base_image))
    assert first.success, first.error
    sandbox_id = first.outputs.sandbox.id
    try:
        other = go(
            SECOND, collection="someone-else", continue_from=first.trajectory_id, **on_image(base_image)
        )
        assert other.failed_stage == "create" and "no such run in collection 'someone-else'" in other.error
        assert docker_backend.attach(sandbox_id).exec("cat /app/state.txt").ok, "the refusal touched it"
        second = go(SECOND, keep_sandbox=True, continue_from=first.trajectory_id, **on_image(base_image))
        assert second.success, second.error
        again = go(SECOND, continue_from=first.trajectory_id, **on_image(base_image))
        assert again.failed_stage == "create" and f"in use by run {second.trajectory_id}" in again.error
        not_kept = go(SECOND, continue_from=again.trajectory_id, **on_image(base_image))
        assert "was not kept" in not_kept.error
        # the chain: the second run kept it again; the sweep keeps it while kept
        sweep_once(lambda: docker_backend, Services(get_settings()).store, get_settings())
        assert sandbox_id in {s.id for s in docker_backend.list_sandboxes()}, "swept while kept"
        docker_backend.remove(sandbox_id)
        gone = go(SECOND, continue_from=second.trajectory_id, **on_image(base_image))
        assert gone.failed_stage == "create" and "kept sandbox is gone" in gone.error
    finally:
        docker_backend.remove(sandbox_id)


def test_a_kept_sandbox_expires_and_the_sweep_deletes_it(base_image, docker_backend, monkeypatch):
    monkeypatch.setenv("PIER_KEEP_TTL_SEC", "2")
    first = go(FIRST, keep_sandbox=True, **on_image(base_image))
    assert first.success, first.error
    sandbox_id = first.outputs.sandbox.id
    try:
        settings = get_settings()
        sweep_once(lambda: docker_backend, Services(settings).store, settings)
        assert sandbox_id in {s.id for s in docker_backend.list_sandboxes()}, "swept before it expired"
        time.sleep(2.5)
        late = go(SECOND, continue_from=first.trajectory_id, **on_image(base_image))
        assert late.failed_stage == "create" and "expired" in late.error
        sweep_once(lambda: docker_backend, Services(settings).store, settings)
        assert sandbox_id not in {s.id for s in docker_backend.list_sandboxes()}, "not swept once expired"
    finally:
        docker_backend.remove(sandbox_id)


# --- snapshot from a run --------------------------------------------------------


def test_snapshot_save_from_a_kept_sandbox_then_a_run_starts_from_it(base_image, docker_backend, tmp_path):
    import subprocess
    import sys
    import uuid

    from pier.lifecycle.sessions import snapshot_ref

    collection = f"snap-{uuid.uuid4().hex[:8]}"
    name = f"prepared-{uuid.uuid4().hex[:6]}"
    first = go(FIRST + "\necho secret-ish > /logs/agent/note.txt", collection=collection, keep_sandbox=True,
               **on_image(base_image))  # fmt: skip
    assert first.success, first.error
    ref = snapshot_ref(collection, name)
    try:
        began = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "pier.cli", "snapshot", "save", first.trajectory_id, name,
             "--collection", collection], capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        saved_s = time.monotonic() - began
        assert proc.returncode == 0, proc.stderr
        assert docker_backend.image_exists(ref)
        check = (
            "cat /app/state.txt > {{results_dir}}/seen.txt; /opt/tool/run >> {{results_dir}}/seen.txt\n"
            "ls -A /logs/agent > {{results_dir}}/logs.txt; ls -A /run/pier > {{results_dir}}/pier.txt 2>&1 || true"
        )
        later = go(check, collection=collection, snapshot=name)
        assert later.success, later.error
        assert later.outputs.sandbox.image == ref and later.outputs.sandbox.source == "snapshot"
        results = run_folder(later) / "results"
        assert (results / "seen.txt").read_text() == "from the first run\ntool-v1\n"
        assert "note.txt" not in (results / "logs.txt").read_text(), "the first run's logs went into it"
        stranger = go("cat /app/state.txt > {{results_dir}}/x.txt", collection=collection + "-other",
                      snapshot=name, image=base_image)  # fmt: skip
        assert (
            not stranger.success
            and "No such file" in (run_folder(stranger) / "logs" / "agent.log").read_text()
        )
        print(f"snapshot save took {saved_s:.1f} s")
    finally:
        docker_backend.remove(first.outputs.sandbox.id)
        docker_backend.remove_image(ref)


def test_snapshot_save_is_refused_for_a_run_not_kept_or_of_another_collection(base_image):
    import subprocess
    import sys

    plain = go(FIRST, **on_image(base_image))
    assert plain.success, plain.error
    for args, says in (
        ([plain.trajectory_id, "x", "--collection", "tests"], "was not kept"),
        ([plain.trajectory_id, "x", "--collection", "someone-else"], "not found"),
        ([plain.trajectory_id, "Bad/Name", "--collection", "tests"], "invalid snapshot name"),
    ):
        proc = subprocess.run([sys.executable, "-m", "pier.cli", "snapshot", "save", *args],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode != 0 and says in proc.stderr, (args, proc.stderr)


# --- pause and resume -----------------------------------------------------------


def test_pause_frees_the_cpu_and_continue_resumes_it(base_image, docker_backend):
    import subprocess
    import sys

    busy = FIRST + "\nnohup bash -c 'while :; do :; done' >/dev/null 2>&1 &\nsleep 0.2"
    first = go(busy, collection="local", keep_sandbox=True, **on_image(base_image))
    assert first.success, first.error
    sandbox_id = first.outputs.sandbox.id
    try:
        docker_backend.attach(sandbox_id).exec("nohup bash -c 'while :; do :; done' >/dev/null 2>&1 &")

        def cpu_ns() -> int:
            stats = docker_backend.api.stats(sandbox_id, stream=False)
            return int(stats["cpu_stats"]["cpu_usage"]["total_usage"])

        def used(seconds: float) -> float:
            before = cpu_ns()
            time.sleep(seconds)
            return (cpu_ns() - before) / 1e9

        assert used(1.0) > 0.3, "the busy loop does not use the CPU: the test cannot tell"
        began = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pier.cli", "sandbox", "pause", first.trajectory_id],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        paused_s = time.monotonic() - began
        assert proc.returncode == 0 and "paused" in proc.stdout, proc.stderr
        assert docker_backend.paused(sandbox_id)
        assert used(1.0) < 0.05, "a paused sandbox still used the CPU"
        began = time.monotonic()
        then = go(SECOND, collection="local", continue_from=first.trajectory_id, **on_image(base_image))
        continued_s = time.monotonic() - began
        assert then.success, then.error  # continue resumed it
        assert (run_folder(then) / "results" / "seen.txt").read_text().startswith("from the first run")
        print(f"pause took {paused_s:.1f} s (CLI); continue from paused {continued_s:.1f} s")
    finally:
        docker_backend.remove(sandbox_id)
