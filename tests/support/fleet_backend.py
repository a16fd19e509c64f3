"""A sandbox backend for fleet tests that need no Docker: the fake backend
(scripted), whose agent writes a result, after PIER_TEST_AGENT_SEC seconds
when that is set (a run to kill or cancel mid-agent), and copies the attached
files it was given (/app/assets) to results as asset-<name>. With
PIER_TEST_AGENT_LINES the agent first logs that many lines, `tick 1`, `tick 2`,
..., one every PIER_TEST_LINE_SEC seconds, as a real agent's output comes (a
live log to follow). Named to `pier worker` as
PIER_SANDBOX_BACKEND=tests.support.fleet_backend:backend."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from pier.sandbox.base import ExecResult
from pier.sandbox.fake import FakeBackend, FakeSandbox, Script, replied
from pier.settings import Settings

AGENT = r"script\.sh"


def tick(n: int) -> str:
    """The agent's n-th live line (1-based)."""
    return f"tick {n}"


def _agent(sandbox, call) -> None:
    seconds = float(os.environ.get("PIER_TEST_AGENT_SEC") or 0)
    given = os.environ.get("PIER_TEST_AGENT_SEC_FILE")  # changed by a test while its workers run
    if given and Path(given).exists():
        seconds = float(Path(given).read_text())
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sandbox._alive()  # deleted (cancelled): the command ends, as in a container
        time.sleep(0.1)
    sandbox.put_files("/app/results", {"out.txt": b"done\n"})
    big = int(os.environ.get("PIER_TEST_RESULT_MB") or 0)  # a result to fill a disk with: the first run's
    once = Path(os.environ.get("PIER_TEST_RESULT_ONCE") or os.devnull)
    if big and once != Path(os.devnull) and not once.exists():
        once.touch()
        with open(sandbox.host_path("/app/results") / "big.bin", "wb") as out:
            for _ in range(big):
                out.write(os.urandom(1 << 20))
    assets = sandbox.host_path("/app/assets")  # attached files, copied back as results
    copies = (
        {f"asset-{f.name}": f.read_bytes() for f in assets.iterdir() if f.is_file()}
        if assets.is_dir()
        else {}
    )
    if copies:
        sandbox.put_files("/app/results", copies)


class TickingSandbox(FakeSandbox):
    """The agent's command streams PIER_TEST_AGENT_LINES lines through on_line
    before its scripted reply: the scripted fake hands a command's output over
    only when it has ended, which is no live log."""

    def exec(self, command, *, on_line=None, **kwargs):
        lines = int(os.environ.get("PIER_TEST_AGENT_LINES") or 0)
        text = command if isinstance(command, str) else " ".join(command)
        if lines and on_line is not None and re.search(AGENT, text):
            gap = float(os.environ.get("PIER_TEST_LINE_SEC") or 0)
            for n in range(1, lines + 1):
                self._alive()  # deleted (cancelled): the command ends
                on_line(tick(n))
                time.sleep(gap)
        return super().exec(command, on_line=on_line, **kwargs)


class SlowBackend(FakeBackend):
    """Making a sandbox takes PIER_TEST_CREATE_SEC (a worker to lose before its
    agent starts). With PIER_TEST_SANDBOX_MARKS, each live sandbox is a file
    there (named by its id, holding this process's pid) until it is removed:
    what a test counts as sandboxes left."""

    sandbox_class = TickingSandbox

    def create(self, spec):
        time.sleep(float(os.environ.get("PIER_TEST_CREATE_SEC") or 0))
        sandbox = super().create(spec)
        marks = os.environ.get("PIER_TEST_SANDBOX_MARKS")
        if marks:
            Path(marks).mkdir(parents=True, exist_ok=True)
            (Path(marks) / sandbox.id).write_text(str(os.getpid()))
        return sandbox

    def remove(self, sandbox_id):
        super().remove(sandbox_id)
        marks = os.environ.get("PIER_TEST_SANDBOX_MARKS")
        if marks:
            (Path(marks) / sandbox_id).unlink(missing_ok=True)


def sandboxes_left(marks: Path) -> list[str]:
    """The sandboxes still marked by a live process (a SIGKILLed worker's went with it)."""
    left = []
    for mark in marks.iterdir() if marks.is_dir() else []:
        try:
            os.kill(int(mark.read_text()), 0)
        except (ProcessLookupError, ValueError):
            continue
        left.append(mark.name)
    return left


def _du(sandbox, call) -> ExecResult:
    """collect's script (its look inside: `du -sb $dirs | awk sum; find ...`, then
    its marker, its $0), answered as a real sandbox without tar answers it: the
    outputs' bytes (no special files here); the engine's archives read them."""
    total = 0
    for path in re.findall(r"(/[\w/.-]+)", call.text.split("2>")[0]):
        root = sandbox.host_path(path)
        total += sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0
    marker = "" if isinstance(call.command, str) else f"{call.command[-1]}\n"
    return replied(f"bytes {total}\n{marker}")


def backend(settings: Settings) -> FakeBackend:
    return SlowBackend(settings, program=Script().on(AGENT, _agent).on(r"du -sb ", _du))
