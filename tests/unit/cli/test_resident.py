"""`pier run` through the resident process (pier.launch, pier.resident), as real processes on
the fake sandbox backend: it prints and exits as the in-process `pier run` does,
Ctrl-C and a killed client cancel the run, a run is started once or not at all,
no resident means the run happens in-process (and one is started), and the
client imports nothing of pier before it hands the command over."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pier import launch
from pier import resident as resident_module
from tests.support.resident import serving, socket_of

ROOT = Path(__file__).resolve().parents[3]
HELLO = str(ROOT / "examples" / "hello")


@pytest.fixture
def env(pier_home: Path, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PIER_HOME": str(pier_home),
        "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)])),
        "PIER_SANDBOX_BACKEND": "tests.support.fleet_backend:backend",
        "PIER_TEST_AGENT_LINES": "5",
        "PIER_TEST_LINE_SEC": "0.02",
        "COLUMNS": "80",
        "PIER_RESIDENT": "true",
        "PIER_RESIDENT_DIR": str(tmp_path / "resident"),
    }


@pytest.fixture
def resident(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    with serving(env) as process:
        yield process


def client(env: dict[str, str], *args: str, **popen) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pier.launch", *args], env=env, text=True, **popen)


LONG_AGENT = {"PIER_TEST_AGENT_LINES": "400", "PIER_TEST_LINE_SEC": "0.05"}  # 20 s of agent output


@contextlib.contextmanager
def running_agent(env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """A handed `pier run` whose agent has started."""
    with client(env, "run", HELLO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if "starting agent" in line:
                break
        yield process


def in_process(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def handed(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    with client(env, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def same(text: str) -> str:
    """Output with what differs between two runs of the same runbook taken out."""
    text = re.sub(r"[0-9a-f]{12,}", "<id>", text)
    return re.sub(r"\d+(\.\d+)?\s?s\b", "<t>", text)


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid):
            found.append(int(stat.parent.name))
    return found


def last_run(env: dict[str, str]) -> dict:
    lines = in_process(env, "runs", "--json", "--limit", "1").stdout.splitlines()
    return json.loads(lines[0]) if lines else {}


def test_a_run_handed_over_prints_and_exits_as_in_process(env, resident):
    in_process(env, "run", HELLO)  # the first run on a machine says some things in full, once
    here = in_process(env, "run", HELLO)
    with client(env, "run", HELLO, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        ran_in = []
        while process.poll() is None and not ran_in:
            ran_in = children_of(resident.pid)  # the resident's child runs it, not the client
            time.sleep(0.01)
        out, err = process.communicate(timeout=120)
    assert ran_in, "no child of the resident ran the command"
    assert (process.returncode, same(out), same(err)) == (
        here.returncode,
        same(here.stdout),
        same(here.stderr),
    )
    assert here.returncode == 0 and "completed" in err


@pytest.mark.parametrize(
    "args",
    [["run", "/nonexistent/RUNBOOK.md"], ["run", HELLO, "--var", "nme=Ada"], ["run", HELLO, "--json"]],
    ids=["missing-runbook", "bad-var", "json"],
)
def test_exit_codes_and_messages_are_the_in_process_ones(env, resident, args):
    in_process(env, "run", HELLO)  # the first run on a machine says some things in full, once
    here, there = in_process(env, *args), handed(env, *args)
    assert there.returncode == here.returncode
    assert same(there.stderr) == same(here.stderr)
    if "--json" in args:
        assert json.loads(there.stdout).keys() == json.loads(here.stdout).keys()
        assert json.loads(there.stdout)["status"] == "completed"


def test_ctrl_c_on_the_client_cancels_the_run(env, resident):
    env = {**env, **LONG_AGENT}
    with running_agent(env) as process:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    assert process.returncode == 130
    assert last_run(env)["status"] == "cancelled"


def test_a_killed_client_cancels_its_run(env, resident):
    env = {**env, **LONG_AGENT}
    with running_agent(env) as process:
        process.kill()
    deadline = time.monotonic() + 60
    while last_run(env).get("status") not in ("cancelled", "failed", "completed"):
        assert time.monotonic() < deadline, last_run(env)
        time.sleep(0.5)
    assert last_run(env)["status"] == "cancelled"
    while children_of(resident.pid):  # the child ends once its record is saved
        assert time.monotonic() < deadline, "the run's process outlived its run"
        time.sleep(0.05)


def test_a_client_that_never_says_go_runs_nothing(env, resident):
    path = socket_of(env)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(path))
        header = {"argv": ["run", HELLO], "cwd": os.getcwd(), "env": env, "umask": 0o022}
        with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
            fds = [null_in.fileno(), null_out.fileno(), null_out.fileno()]
            socket.send_fds(conn, [json.dumps(header).encode() + b"\n"], fds)
        child = json.loads(conn.makefile("rb").readline())["pid"]
    # closed without "go": the client runs it itself, so the child must not
    deadline = time.monotonic() + 30
    while child in children_of(resident.pid):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert last_run(env) == {}
    assert handed(env, "run", HELLO).returncode == 0  # and the resident serves the next
    assert last_run(env)["status"] == "completed"


def test_without_a_resident_the_run_is_in_process_and_one_is_started(env):
    path = socket_of(env)
    assert not path.exists()
    done = handed(env, "run", HELLO)
    assert done.returncode == 0 and last_run(env)["status"] == "completed"
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, "no resident was started"
        time.sleep(0.1)
    assert handed(env, "run", HELLO).returncode == 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if str(path).encode() in cmdline.read_bytes():
                os.kill(int(cmdline.parent.name), signal.SIGTERM)


def test_off_means_no_resident(env):
    env = {**env, "PIER_RESIDENT": "false"}
    assert handed(env, "run", HELLO).returncode == 0
    time.sleep(1)
    assert not any(Path(env["PIER_RESIDENT_DIR"]).glob("*.sock"))


def test_an_edited_source_file_is_another_resident(tmp_path, monkeypatch):
    package = tmp_path / "pier"
    package.mkdir()
    (package / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(resident_module, "PACKAGE", package)
    before = resident_module.source_token()
    (package / "a.py").write_text("x = 2\n")
    assert resident_module.source_token() != before


@pytest.mark.parametrize(
    ("module", "loaded"),
    [("launch", "['pier', 'pier.launch']"), ("resident", "['pier', 'pier.resident']")],
)
def test_the_client_imports_nothing_of_pier_but_its_own_module(module, loaded):
    # pier.launch is every `pier` call's entry; pier.resident's client half, a local `pier run`'s
    code = (
        f"import sys; from pier import {module}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pier', 'pydantic', 'typer', 'sqlalchemy', 'docker', 'rich')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == loaded, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("variables", "enabled"),
    [
        ({}, True),
        ({"PIER_RESIDENT": "false"}, False),
        ({"CI": "true"}, False),  # a job's clean-up would kill a resident serving the next job
        ({"CI": "false"}, True),
        ({"JENKINS_URL": "http://jenkins.example"}, False),
        ({"CI": "true", "PIER_RESIDENT": "true"}, True),
    ],
)
def test_on_unless_turned_off_or_in_a_ci_job(monkeypatch, variables, enabled):
    for name in ("PIER_RESIDENT", *launch.CI_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert launch.enabled() is enabled


def test_another_pythonpath_is_another_resident(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/one")
    one = resident_module.source_token()
    monkeypatch.setenv("PYTHONPATH", "/two")
    assert resident_module.source_token() != one


def test_a_child_killed_outright_still_gives_its_client_an_exit_code(env, resident):
    env = {**env, **LONG_AGENT}
    with running_agent(env) as process:
        (child,) = children_of(resident.pid)
        os.kill(child, signal.SIGKILL)  # it cannot say its code: the resident does
        process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGKILL
