"""A command ends when its main process exits, even when a background child it
left keeps its output open; what it left behind is stopped then. Before, such a
child held the exec (and the run) until the time limit, which then failed it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pier.errors import SandboxError
from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.sandbox.docker.sandbox import DockerSandbox
from pier.sandbox.processes import STOP_PROCESSES_SCRIPT

pytestmark = pytest.mark.integration

LIMIT_S = 60  # what a hang would run into; the command itself takes no time


@pytest.fixture
def sandbox(docker_backend: DockerBackend, base_image: str) -> Iterator[DockerSandbox]:
    spec = SandboxSpec(
        image=base_image,
        limits=Limits(cpus=1, memory="256m", network=False),
        labels={LABEL_RUN: f"test-{uuid.uuid4().hex[:12]}"},
    )
    made = docker_backend.create(spec)
    yield made
    made.delete()


def test_a_background_child_holding_stdout_does_not_hold_the_exec(sandbox):
    script = "echo before; sleep 600 & echo after; exit 3"
    result = sandbox.exec(script, timeout=LIMIT_S)
    assert not result.timed_out, f"the exec ran into its limit ({result.duration_s:.0f}s)"
    assert result.exit_code == 3  # the main process's own code
    assert result.output.split() == ["before", "after"]
    left = sandbox.exec("ps -eo args | grep -c '^sleep 600' || true", timeout=30)
    assert left.output.strip() == "0", "the background child was left running"


def test_a_child_in_its_own_session_is_stopped_too(sandbox):
    # setsid leaves the exec's process group: the exec's marker still finds it.
    result = sandbox.exec("setsid sleep 600 & echo started", timeout=LIMIT_S)
    assert result.ok and result.output.strip() == "started"
    left = sandbox.exec("ps -eo args | grep -c '^sleep 600' || true", timeout=30)
    assert left.output.strip() == "0"


def test_output_the_main_process_wrote_last_is_kept(sandbox):
    result = sandbox.exec("sleep 600 & seq 1 20000; echo last", timeout=LIMIT_S)
    lines = result.output.split()
    assert lines[-1] == "last" and len(lines) == 20001


RUNBOOK = """---
agent: script
snapshot: ""
timeout_sec: 60
---
```bash
python3 -m http.server 8000 &
echo done > {{results_dir}}/out.txt
```
"""


def test_a_run_whose_agent_leaves_a_server_running_completes(base_image, tmp_path: Path):
    from tests.integration.test_bounded_memory import pier_run

    runbook = tmp_path / "rb" / "RUNBOOK.md"
    runbook.parent.mkdir()
    runbook.write_text(RUNBOOK)
    record, _, _ = pier_run(runbook, base_image, tmp_path)
    assert record["status"] == "completed" and record["steps"]["run"]["outputs"]["success"], record["error"]
    assert (tmp_path / "storage" / record["storage_path"] / "results" / "out.txt").read_text() == "done\n"


# /proc/PID/stat after "PID (comm) ": $4 is the session.
SESSIONS = r"""for d in /proc/[0-9]*; do
  set -- $(sed 's/^.*) //' "$d/stat" 2>/dev/null); [ -n "${4:-}" ] && echo "${d#/proc/} $4 $(cat "$d/comm")"
done"""


def test_the_keepalive_alone_shares_pid_1s_session_on_each_runtime(base_image, on_runtime):
    # The stop script spares the keep-alive by this layout, whatever the order the
    # engine started things in: docker-init's child in its session, each exec in its own.
    from pier.settings import get_settings

    backend = DockerBackend(get_settings())
    spec = SandboxSpec(
        image=base_image,
        limits=Limits(cpus=1, memory="256m", network=False),
        labels={LABEL_RUN: f"test-{uuid.uuid4().hex[:12]}"},
    )
    made = backend.create(spec)
    try:
        listed = made.exec("setsid sleep 600 & sleep 600 & sleep 0.2; " + SESSIONS, timeout=30).output
        rows = [line.split() for line in listed.splitlines()]
        init_session = next(row[1] for row in rows if row[0] == "1")
        with_init = [row for row in rows if row[1] == init_session and row[0] != "1"]
        assert len(rows) >= 5 and [row[2] for row in with_init] == ["sleep"], rows  # the keep-alive alone
        stopped = made.exec("bash -c 'sleep 601 & setsid sleep 602 &'; " + STOP_PROCESSES_SCRIPT, timeout=30)
        assert stopped.ok and int(stopped.output.split()[-1]) >= 2, stopped.output  # the two, and any zombie
        assert made.exec("ps -eo args | grep -c '^sleep 60' || true", timeout=30).output.strip() == "0"
        assert made.exec("echo alive", timeout=30).output.strip() == "alive"  # the keep-alive lived
    finally:
        made.delete()


def test_a_command_in_a_stopped_sandbox_says_how_the_sandbox_ended(sandbox, docker_backend):
    docker_backend.api.kill(sandbox.id)
    with pytest.raises(SandboxError) as raised:
        sandbox.exec("true", timeout=30)
    assert "stopped under the run (its main process exited with code 137 at " in str(raised.value)
