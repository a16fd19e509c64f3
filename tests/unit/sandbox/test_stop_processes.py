"""What the stop script spares and what it kills, on real processes in a real PID
namespace (`unshare`), laid out as a sandbox is: pid 1 an init in its own
session, the keep-alive its child in that session, an exec in a session of its
own. The orders the engine can produce are set here by hand, the one that broke
runs first: an exec started before the init had forked the keep-alive."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from pier.sandbox.processes import STOP_PROCESSES_SCRIPT, stop_leftovers_after

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("setsid") is None,
    reason="needs root and util-linux's unshare and setsid (a PID namespace of its own)",
)


def in_sandbox_like_namespace(exec_body: str, folder: Path, *, keepalive_after_exec: bool) -> dict[str, str]:
    """Run exec_body as an exec would (its own session) beside a keep-alive that
    pid 1 starts before it or after it; report which processes are alive at the
    end, by the names the body gave them."""
    exec_part = f"setsid bash -c {shlex.quote(exec_body)} > $DIR/exec-out 2>&1 &\nexec_pid=$!\n"
    keepalive = "sleep 600 &\nkeep=$!\n"
    first, second = (exec_part, keepalive) if keepalive_after_exec else (keepalive, exec_part)
    init = (
        f"{first}sleep 0.3\n{second}"
        "touch $DIR/go\n"
        "while kill -0 $exec_pid 2>/dev/null; do sleep 0.05; done\n"
        "sleep 0.3\n"
        'kill -0 $keep 2>/dev/null && echo "keepalive=alive" || echo "keepalive=dead"\n'
        "for name in leftover daemon; do\n"
        '  if pgrep -f "^sleep 60[12] # $name" >/dev/null; then echo "$name=alive"; else echo "$name=dead"; fi\n'
        "done\n"
        "cat $DIR/exec-out; rm -f $DIR/exec-out $DIR/go\n"
    )
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "setsid", "bash", "-c", init],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DIR": str(folder)},
    )
    assert done.returncode == 0, done.stderr
    found = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return found


AGENT = (
    "while [ ! -e $DIR/go ]; do sleep 0.05; done\n"
    # what an agent leaves: a plain background child, and a daemon in a session of its own
    "bash -c 'exec -a \"sleep 601 # leftover\" sleep 601' &\n"
    "setsid bash -c 'exec -a \"sleep 602 # daemon\" sleep 602' &\n"
    "sleep 0.2\n"
)


@pytest.mark.parametrize("keepalive_after_exec", [True, False], ids=["exec-first", "keepalive-first"])
def test_the_agents_leftovers_are_stopped_and_the_keepalive_is_spared(
    keepalive_after_exec: bool, tmp_path: Path
) -> None:
    body = f"bash -c {shlex.quote(AGENT)}\n( {STOP_PROCESSES_SCRIPT} )\n"
    found = in_sandbox_like_namespace(body, tmp_path, keepalive_after_exec=keepalive_after_exec)
    assert found.get("keepalive") == "alive", found  # killed, it would end the sandbox
    assert found.get("leftover") == "dead" and found.get("daemon") == "dead", found


def test_the_agents_group_spares_the_keepalive_started_after_it(tmp_path: Path) -> None:
    # How the agent runs: its command, then the script, left of the `| tee`.
    body = stop_leftovers_after(f"bash -c {shlex.quote(AGENT)}") + " | cat\necho status=$?\n"
    found = in_sandbox_like_namespace(body, tmp_path, keepalive_after_exec=True)
    assert found.get("keepalive") == "alive", found
    assert found.get("leftover") == "dead" and found.get("daemon") == "dead", found
    assert found.get("status") == "0", found
