"""Running a command in a sandbox: output streamed line by line, bounded, and a
timeout that kills the command's whole process tree.

A command ends when its main process exits, not when its output closes: a
background child that keeps stdout open (`server &`) would otherwise hold the
exec, and the run, until its time limit. Once the engine reports the main
process gone, what it left behind is killed, and the rest of the output is
read until it ends (or for CLOSE_GRACE_S at most).

Two layers enforce the timeout. Inside the sandbox the command runs under
`timeout -s KILL`, which puts it in a process group of its own and kills that
group on time. With a grace (the agent's exec: PIER_KILL_GRACE_SEC), it runs
under `timeout -s TERM -k GRACE` instead: the group gets SIGTERM on time and
SIGKILL GRACE seconds later, and between the two a small wrapper (GRACE_WRAPPER)
keeps the exec alive while anything of the group still runs, so what the
command writes in its grace (a trap's last results) is kept. From the host, a watchdog kills every process carrying the exec's
marker (and the groups they lead) a little later, which catches children that
left the group, then stops reading if the output still has not ended.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

import docker
from docker.utils.socket import frames_iter

from pier.sandbox.base import ExecResult, LineSink, StdoutStream

log = logging.getLogger(__name__)

MARKER_VAR = "PIER_EXEC_ID"
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KILL_GRACE_S = 2.0  # after the in-sandbox timeout, before the host kills
CLOSE_GRACE_S = 5.0  # after the host kill, before the host stops reading
MAX_OUTPUT_CHARS = 1 << 20
MAX_LINE_CHARS = 1 << 16  # a longer run without a newline is passed on in pieces
TIMEOUT_EXIT_CODES = (124, 137, 143)
# The engine carries stdout and stderr on two pipes, which reorders them; one
# pipe keeps the output in the order the command wrote it.
MERGE_STDERR = ("sh", "-c", 'exec "$@" 2>&1', "sh")

# $1 is MARKER_VAR=<id>. Every process whose environment holds it is killed, and
# first the process groups they lead (`timeout` leads one), so children that
# reset their environment go too, even when their group leader exits first.
KILL_SCRIPT = r"""
pids=""
for d in /proc/[0-9]*; do
  if tr '\000' '\n' 2>/dev/null < "$d/environ" | grep -qxF "$1"; then
    pids="$pids ${d#/proc/}"
  fi
done
for pid in $pids; do kill -s KILL -- "-$pid" 2>/dev/null; done
for pid in $pids; do kill -s KILL "$pid" 2>/dev/null; done
true
"""


# Runs "$@" in the background of the same process group and waits for it.
# SIGTERM (the time limit, with a grace) does not end the wrapper: it waits for
# its command, then while any other process of its group (but its parent, the
# `timeout` that leads the group) is left, so the exec lasts through the grace;
# `timeout -k` KILLs the whole group when the grace is over.
GRACE_WRAPPER = r"""
"$@" &
child=$!
termed=""
trap 'termed=1' TERM
while :; do
  wait "$child"; status=$?
  kill -0 "$child" 2>/dev/null || break
done
if [ -n "$termed" ]; then
  me=$$; parent=$PPID
  read -r line < /proc/$me/stat; line=${line##*") "}; set -- $line; group=$3
  while :; do
    left=""
    for dir in /proc/[0-9]*; do
      pid=${dir#/proc/}
      case "$pid" in "$me"|"$parent") continue;; esac
      line=""; { read -r line < "$dir/stat"; } 2>/dev/null; line=${line##*") "}
      set -- $line
      [ "${3:-}" = "$group" ] && [ "${1:-}" != Z ] && { left=1; break; }
    done
    [ -z "$left" ] && break
    sleep 0.2
  done
fi
exit "$status"
"""


def exec_argv(
    command: str | Sequence[str],
    *,
    env: Mapping[str, str] | None,
    clean_env: bool,
    timeout: float | None,
    grace: float | None = None,
) -> list[str]:
    """The argv that runs command with its env and timeout (`timeout 0` is none),
    stderr merged into stdout; with a grace, SIGTERM at the timeout and SIGKILL
    `grace` seconds later."""
    argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
    if clean_env:
        assignments = [f"{key}={value}" for key, value in (env or {}).items()]
        base = [f"PATH={CLEAN_PATH}", "HOME=/root", "LANG=C.UTF-8"]
        argv = ["env", "-i", *base, *assignments, *argv]
    if grace and timeout is not None:
        argv = ["sh", "-c", GRACE_WRAPPER, "pier-grace", *argv]
    return timed([*MERGE_STDERR, *argv], timeout, grace)


def timed(argv: Sequence[str], timeout: float | None, grace: float | None = None) -> list[str]:
    """argv under coreutils' timeout (`timeout 0` is none): KILLed past it, or
    TERMed at it and KILLed `grace` seconds later."""
    seconds = "0" if timeout is None else f"{max(timeout, 0.1):g}"
    if grace and timeout is not None:
        return ["timeout", "-s", "TERM", "-k", f"{max(grace, 0.1):g}", seconds, *argv]
    return ["timeout", "-s", "KILL", seconds, *argv]


def exec_environment(env: Mapping[str, str] | None, clean_env: bool, marker: str) -> dict:
    """What the exec's first process gets; under clean_env, env travels in argv."""
    return {**({} if clean_env else dict(env or {})), MARKER_VAR: marker}


class OutputCollector:
    """Decodes output chunks, hands complete lines to on_line, and keeps the last
    MAX_OUTPUT_CHARS characters, noting how much was dropped before them."""

    def __init__(self, on_line: LineSink | None, limit: int = MAX_OUTPUT_CHARS):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._on_line = on_line
        self._limit = limit
        self._chunks: list[str] = []
        self._size = 0
        self._dropped = 0
        self._partial = ""

    def feed(self, data: bytes) -> None:
        self._take(self._decoder.decode(data))

    def finish(self) -> str:
        self._take(self._decoder.decode(b"", final=True))
        if self._partial and self._on_line:
            self._on_line(self._partial.rstrip("\r"))
        self._partial = ""
        self._trim(self._limit)
        text = "".join(self._chunks)
        if self._dropped:
            return f"[... {self._dropped} characters of earlier output dropped ...]\n{text}"
        return text

    def _take(self, text: str) -> None:
        if not text:
            return
        self._chunks.append(text)
        self._size += len(text)
        if self._size > 2 * self._limit:
            self._trim(self._limit)
        if self._on_line:
            *lines, self._partial = (self._partial + text).split("\n")
            if len(self._partial) > MAX_LINE_CHARS:
                lines.append(self._partial)
                self._partial = ""
            for line in lines:
                self._on_line(line.rstrip("\r"))

    def _trim(self, limit: int) -> None:
        if self._size <= limit:
            return
        text = "".join(self._chunks)
        self._dropped += len(text) - limit
        self._chunks, self._size = [text[-limit:]], limit


class Watchdog:
    """Past timeout (+ the command's grace) + KILL_GRACE_S calls kill;
    CLOSE_GRACE_S later calls close."""

    def __init__(
        self,
        timeout: float | None,
        kill: Callable[[], None],
        close: Callable[[], None],
        grace: float | None = None,
    ):
        self.fired = False
        self._done = threading.Event()
        self._timeout = None if timeout is None else timeout + (grace or 0.0)
        self._kill, self._close = kill, close
        self._thread = threading.Thread(target=self._watch, name="pier-exec-watchdog", daemon=True)

    def start(self) -> Watchdog:
        if self._timeout is not None:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        assert self._timeout is not None
        if self._done.wait(self._timeout + KILL_GRACE_S):
            return
        self.fired = True
        self._kill()
        if not self._done.wait(CLOSE_GRACE_S):
            self._close()


class ExitWatch:
    """Polls the engine for the exec's main process; once it has exited and the
    output has still not ended SETTLE_S later, calls kill (its leftovers hold the
    output open) and, if the output still has not ended CLOSE_GRACE_S later,
    close. Polls start fast and slow down, so a short command costs no extra
    round trip and a long one about one a second.

    `exited(sandbox_too)` answers; sandbox_too asks whether the whole sandbox
    stopped as well, which costs a second round trip: it is asked once the polls
    are at their slowest (a command that ran for more than a second or so), as a
    stopped sandbox is rare and a second later is soon enough for it."""

    FIRST_POLL_S = 0.2
    MAX_POLL_S = 1.0
    # The output ends a moment after the process on a machine at rest, and later
    # on a loaded one (the reader has not got there yet): a kill before this
    # costs an exec of its own for nothing.
    SETTLE_S = 0.5

    def __init__(self, exited: Callable[[bool], bool], kill: Callable[[], None], close: Callable[[], None]):
        self.fired = False
        self._done = threading.Event()
        self._exited, self._kill, self._close = exited, kill, close
        self._thread = threading.Thread(target=self._watch, name="pier-exec-exit", daemon=True)

    def start(self) -> ExitWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        interval = self.FIRST_POLL_S
        while not self._done.wait(interval):
            try:
                if not self._exited(interval >= self.MAX_POLL_S):
                    interval = min(interval * 2, self.MAX_POLL_S)
                    continue
            except Exception as exc:  # the engine did not answer: ask again later
                log.debug("could not inspect an exec: %s", exc)
                interval = self.MAX_POLL_S
                continue
            if self._done.wait(self.SETTLE_S):
                return  # the output ended on its own: nothing was left behind
            self.fired = True
            self._kill()
            if not self._done.wait(CLOSE_GRACE_S):
                self._close()
            return


def exec_exited(api: docker.APIClient, exec_id: str, sandbox_too: bool = True) -> bool:
    """Whether the exec's main process is gone, or (sandbox_too) its whole
    sandbox stopped or was removed: the engine may then keep the exec's stream
    open, and report it running, for ever (gVisor's runtime does so after a
    removal)."""
    try:
        state = api.exec_inspect(exec_id)
        if not state.get("Running"):
            return True
        if not sandbox_too:
            return False
        container = api.inspect_container(state["ContainerID"])
    except docker.errors.NotFound:  # the sandbox, and its exec with it, was removed
        return True
    return not (container.get("State") or {}).get("Running")


def kill_marked(api: docker.APIClient, container_id: str, marker: str) -> None:
    """Kill every process of one exec, from a second exec. Best effort."""
    try:
        exec_id = api.exec_create(
            container_id, ["sh", "-c", KILL_SCRIPT, "pier-kill", f"{MARKER_VAR}={marker}"]
        )["Id"]
        api.exec_start(exec_id)
    except Exception as exc:  # the sandbox may be gone: nothing left to kill
        log.debug("could not kill the processes of exec %s: %s", marker, exc)


def _close_quietly(stream: Any) -> None:
    """Stop reading an exec's output; unblocks a reader waiting in another thread."""
    with contextlib.suppress(Exception):  # already closed by the engine or the watchdog
        stream.close()


def wait_exit_code(api: docker.APIClient, exec_id: str, wait_s: float = 3.0) -> int | None:
    """The exec's exit code; the engine can report it a moment after output ends."""
    deadline = time.monotonic() + wait_s
    while True:
        state = api.exec_inspect(exec_id)
        if not state.get("Running") or time.monotonic() > deadline:
            code = state.get("ExitCode")
            return None if state.get("Running") or code is None else int(code)
        time.sleep(0.05)


def run_exec(
    api: docker.APIClient,
    container_id: str,
    command: str | Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    workdir: str = "/app",
    timeout: float | None = None,
    on_line: LineSink | None = None,
    clean_env: bool = False,
    grace: float | None = None,
) -> ExecResult:
    """Run command to its end or its timeout (and grace). Docker errors propagate to the caller."""
    marker = uuid.uuid4().hex
    started = time.monotonic()
    exec_id = api.exec_create(
        container_id,
        exec_argv(command, env=env, clean_env=clean_env, timeout=timeout, grace=grace),
        environment=exec_environment(env, clean_env, marker),
        workdir=workdir,
        stdout=True,
        stderr=True,
        tty=False,
    )["Id"]
    stream = api.exec_start(exec_id, stream=True)
    collector = OutputCollector(on_line)
    kill = partial(kill_marked, api, container_id, marker)
    close = partial(_close_quietly, stream)
    watchdog = Watchdog(timeout, kill=kill, close=close, grace=grace).start()
    exit_watch = ExitWatch(partial(exec_exited, api, exec_id), kill=kill, close=close).start()
    try:
        for chunk in stream:  # ends when the command's output closes or on close()
            collector.feed(chunk)
    except BaseException:
        kill()  # a failing line sink, or a cancel: the command must not linger
        raise
    finally:
        watchdog.stop()
        exit_watch.stop()
        close()
    return ended(api, exec_id, collector.finish(), started, timeout, watchdog)


def ended(
    api: docker.APIClient,
    exec_id: str,
    output: str,
    started: float,
    timeout: float | None,
    watchdog: Watchdog,
) -> ExecResult:
    """How an exec whose output has ended ended: its exit code (137 when it was
    killed at its time limit and the engine has none), whether that was its time."""
    duration = time.monotonic() - started
    code = wait_exit_code(api, exec_id)
    timed_out = watchdog.fired or (timeout is not None and code in TIMEOUT_EXIT_CODES and duration >= timeout)
    if code is None:
        code = 137 if timed_out else -1
    return ExecResult(exit_code=code, output=output, duration_s=duration, timed_out=timed_out)


def stream_exec(
    api: docker.APIClient,
    container_id: str,
    argv: Sequence[str],
    *,
    workdir: str = "/",
    timeout: float | None = None,
    errors: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
) -> StdoutStream:
    """Start argv with stdout and stderr apart (the engine frames them) and hand
    its stdout on as bytes. Three round trips, as for run_exec (create, start,
    the exit code); a kill only when it is closed early or runs past timeout.
    `errors` wraps every engine call and read (it turns Docker's errors into
    SandboxError)."""
    marker = uuid.uuid4().hex
    started = time.monotonic()
    with errors():
        exec_id = api.exec_create(
            container_id,
            timed(argv, timeout),
            environment={MARKER_VAR: marker},
            workdir=workdir,
            stdout=True,
            stderr=True,
            tty=False,
        )["Id"]
        frames = api.exec_start(exec_id, stream=True, demux=True)
    stderr = OutputCollector(None, limit=StdoutStream.MAX_STDERR_CHARS)
    kill = partial(kill_marked, api, container_id, marker)
    close = partial(_close_quietly, frames)
    watchdog = Watchdog(timeout, kill=kill, close=close).start()
    # As for run_exec: an engine may keep the stream open after the command's
    # process, or its whole sandbox, is gone (gVisor's does after a removal).
    exit_watch = ExitWatch(partial(exec_exited, api, exec_id), kill=kill, close=close).start()
    state = {"ended": False}

    def chunks() -> Iterator[bytes]:
        with errors():
            for out, err in frames:
                if err:
                    stderr.feed(err)
                if out:
                    yield out
        state["ended"] = True

    def finish() -> ExecResult:
        watchdog.stop()
        exit_watch.stop()
        close()
        with errors():
            return ended(api, exec_id, stderr.finish(), started, timeout, watchdog)

    def stop() -> None:
        watchdog.stop()
        exit_watch.stop()
        if not state["ended"]:
            kill()  # closed early: the command must not go on writing to nobody
        close()

    return StdoutStream(chunks(), finish, stop)


# Extracts a tar from stdin into $1, made first when missing, as the sandbox sees
# its own files (root keeps owners and modes, as the engine's archive call does).
UNTAR = 'mkdir -p -- "$1" && exec tar -x -p -f - -C "$1"'


def exec_untar(api: docker.APIClient, container_id: str, dest_dir: str, chunks: Iterable[bytes]) -> None:
    """Extract a tar stream into dest_dir from inside the sandbox: an exec whose
    stdin is the tar. For runtimes whose file cache does not see what the engine's
    archive call writes from outside (gVisor). Raises RuntimeError when tar fails."""
    exec_id = api.exec_create(
        container_id, ["sh", "-c", UNTAR, "pier-untar", dest_dir], stdin=True, stdout=True, stderr=True
    )["Id"]
    sock = api.exec_start(exec_id, socket=True)
    raw = getattr(sock, "_sock", sock)  # the SDK wraps the hijacked socket in a SocketIO
    try:
        for chunk in chunks:
            raw.sendall(chunk)
        raw.shutdown(socket.SHUT_WR)  # end of the tar: the engine closes tar's stdin
        output = b"".join(data for _stream, data in frames_iter(sock, tty=False))
    finally:
        _close_quietly(sock)
    code = wait_exit_code(api, exec_id, wait_s=30.0)
    if code != 0:
        text = output.decode(errors="replace").strip()[-500:]
        raise RuntimeError(f"tar -x into {dest_dir} exited {code}: {text}")
