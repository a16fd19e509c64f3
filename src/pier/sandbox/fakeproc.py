"""The fake backend's process mode: a command runs as a real host process in the
sandbox's folder, with the contract's env, workdir, streaming, time limit and a
sampled memory ceiling. It is NOT isolation: a command that names an absolute
path or signals other processes reaches the host. Only tests that write their
own commands (the conformance suite) use it."""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pier.sandbox.base import ExecResult, LineSink, StdoutStream

MARKER_VAR = "PIER_FAKE_EXEC_ID"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TIMEOUT_EXIT_CODE = 137
Killer = Callable[[str, "int | None"], None]  # (marker, group leader)
POLL_S = 0.05
CLOSE_GRACE_S = 2.0  # after the kill, before the output of a survivor is abandoned


@dataclass(frozen=True)
class ExecCall:
    """One exec, as the contract received it (paths are sandbox paths)."""

    command: str | Sequence[str]
    env: Mapping[str, str]
    workdir: str
    timeout: float | None
    clean_env: bool
    grace: float | None = None  # SIGTERM at the timeout, SIGKILL this much later

    @property
    def text(self) -> str:
        """The command as one string, for matching."""
        return self.command if isinstance(self.command, str) else " ".join(self.command)


@dataclass(frozen=True)
class ProcessOutcome:
    result: ExecResult
    oom: bool


def process_env(call: ExecCall, spec_env: Mapping[str, str], home: Path, marker: str) -> dict[str, str]:
    """What the command sees: a base like a fresh container's (never the host's own
    variables), the spec's env unless clean_env, then the call's."""
    base = {"PATH": BASE_PATH, "HOME": str(home), "LANG": "C.UTF-8"}
    spec_part = {} if call.clean_env else dict(spec_env)
    return {**base, **spec_part, **call.env, MARKER_VAR: marker}


def run_process(
    call: ExecCall,
    *,
    cwd: Path,
    env: Mapping[str, str],
    memory_bytes: int | None,
    on_line: LineSink | None,
    kill: Killer | None = None,
) -> ProcessOutcome:
    """Run call to its end, its timeout, or its memory ceiling; kill every process
    it started (kill_marked, unless kill says otherwise) when it stops early."""
    argv = ["bash", "-c", call.command] if isinstance(call.command, str) else list(call.command)
    marker = env[MARKER_VAR]
    started = time.monotonic()
    proc = _spawn(argv, cwd, env, subprocess.STDOUT)
    if isinstance(proc, ExecResult):
        return ProcessOutcome(proc, oom=False)
    assert proc.stdout is not None
    lines = _Lines(on_line)
    stop = _Stopper(call.timeout, memory_bytes, marker, proc.pid, kill or kill_marked, call.grace)
    fd = proc.stdout.fileno()
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], POLL_S)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                lines.feed(chunk)
            if stop.check(started) and time.monotonic() - stop.killed_at > CLOSE_GRACE_S:
                break
    except BaseException:
        kill_marked(marker, proc.pid)  # a failing line sink or a cancel: nothing may linger
        raise
    finally:
        proc.stdout.close()
    code = proc.wait()
    if stop.reason or stop.termed_at is not None:
        code = TIMEOUT_EXIT_CODE
    result = ExecResult(
        exit_code=code,
        output=lines.finish(),
        duration_s=time.monotonic() - started,
        timed_out=stop.reason == "timeout" or stop.termed_at is not None,
    )
    return ProcessOutcome(result, oom=stop.reason == "memory")


def _spawn(
    argv: list[str], cwd: Path, env: Mapping[str, str], stderr: int
) -> subprocess.Popen[bytes] | ExecResult:
    """The host process for a call, in a session of its own (so it and what it
    starts can be killed together); a program that does not exist is exit 127
    with what a shell would say."""
    try:
        return subprocess.Popen(
            argv, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=stderr, start_new_session=True
        )
    except OSError as exc:
        return ExecResult(127, f"{argv[0]}: {exc.strerror}\n", 0.0)


def stream_process(
    call: ExecCall, *, cwd: Path, env: Mapping[str, str], kill: Killer | None = None
) -> StdoutStream:
    """Start call as a host process whose stdout streams as bytes and whose stderr
    is kept apart (read by a thread), killed past its timeout or when closed
    before its stdout ended."""
    argv = list(call.command)
    marker = env[MARKER_VAR]
    killer = kill or kill_marked
    started = time.monotonic()
    proc = _spawn(argv, cwd, env, subprocess.PIPE)
    if isinstance(proc, ExecResult):
        failed = proc
        return StdoutStream(iter(()), lambda: failed, lambda: None)
    assert proc.stdout is not None and proc.stderr is not None
    errors: list[bytes] = []
    reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    fired = threading.Event()

    def on_time() -> None:
        fired.set()
        killer(marker, proc.pid)

    timer = threading.Timer(call.timeout, on_time) if call.timeout is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    state = {"ended": False}

    def chunks() -> Iterator[bytes]:
        assert proc.stdout is not None
        while chunk := os.read(proc.stdout.fileno(), 1 << 16):
            yield chunk
        state["ended"] = True

    def finish() -> ExecResult:
        code = proc.wait()
        if timer is not None:
            timer.cancel()
        reader.join(CLOSE_GRACE_S)
        text = b"".join(errors).decode(errors="replace")[-StdoutStream.MAX_STDERR_CHARS :]
        if fired.is_set():
            code = TIMEOUT_EXIT_CODE
        return ExecResult(code, text, time.monotonic() - started, timed_out=fired.is_set())

    def close() -> None:
        if timer is not None:
            timer.cancel()
        if not state["ended"]:
            killer(marker, proc.pid)
        assert proc.stdout is not None
        proc.stdout.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(CLOSE_GRACE_S)

    return StdoutStream(chunks(), finish, close)


def new_marker() -> str:
    return uuid.uuid4().hex


class _Lines:
    def __init__(self, on_line: LineSink | None):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._on_line = on_line
        self._text: list[str] = []
        self._partial = ""

    def feed(self, data: bytes) -> None:
        text = self._decoder.decode(data)
        self._text.append(text)
        *complete, self._partial = (self._partial + text).split("\n")
        for line in complete:
            if self._on_line:
                self._on_line(line)

    def finish(self) -> str:
        self.feed(b"")
        if self._partial and self._on_line:
            self._on_line(self._partial)
        return "".join(self._text)


class _Stopper:
    """Decides when a command must stop (time or memory) and kills it once."""

    def __init__(
        self,
        timeout: float | None,
        memory_bytes: int | None,
        marker: str,
        leader: int,
        kill: Killer,
        grace: float | None = None,
    ):
        self._timeout, self._memory, self._marker, self._leader = timeout, memory_bytes, marker, leader
        self._kill, self._grace = kill, grace
        self.reason: str | None = None
        self.killed_at = 0.0
        self.termed_at: float | None = None  # when the group got SIGTERM (a timeout with a grace)

    def check(self, started: float) -> bool:
        """Whether the command has been killed (now or before)."""
        if self.reason:
            self._kill(self._marker, self._leader)  # a straggler forked during the last kill
            return True
        if self._timeout is not None and time.monotonic() - started >= self._timeout:
            if self._grace and self.termed_at is None:
                self.termed_at = time.monotonic()
                with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
                    os.killpg(self._leader, signal.SIGTERM)
                return False
            if self.termed_at is not None and time.monotonic() - self.termed_at < (self._grace or 0):
                return False
            self.reason = "timeout"
        elif self._memory is not None and resident_bytes(self._marker) > self._memory:
            self.reason = "memory"
        else:
            return False
        self._kill(self._marker, self._leader)
        self.killed_at = time.monotonic()
        return True


def marked_pids(marker: str) -> list[int]:
    """Processes whose environment carries this exec's marker."""
    return marked_by_any({marker})


def marked_by_any(markers: set[str]) -> list[int]:
    """Processes whose environment carries one of these markers (one look at /proc)."""
    needles = {f"{MARKER_VAR}={marker}".encode() for marker in markers}
    found: list[int] = []
    if not needles:
        return found
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as env:
                if needles.intersection(env.read().split(b"\0")):
                    found.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def resident_bytes(marker: str) -> int:
    """Memory the exec's processes hold now (sampled: short spikes can pass)."""
    total = 0
    for pid in marked_pids(marker):
        try:
            with open(f"/proc/{pid}/statm") as statm:
                total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total


def kill_marked_all(markers: set[str]) -> None:
    """Kill every process carrying any of a sandbox's markers: what its commands
    left running goes with it. Repeated while one is found (a loop may fork
    between the look and the kill)."""
    for _ in range(5):
        pids = marked_by_any(set(markers))
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def kill_marked(marker: str, leader: int | None = None) -> None:
    """Kill the exec's process group (leader's, never 0: that is the caller's own)
    and every process carrying its marker, which catches those that left the group
    with setsid."""
    if leader:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
            os.killpg(leader, signal.SIGKILL)
    for pid in marked_pids(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
