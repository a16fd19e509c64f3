"""The pier.owner label: which process made a sandbox or runs a run
("hostname:pid:start"), written by owner_label and judged by owner_alive, the
one rule the sweep, the server's start-up recovery and the CLI's ending of
orphaned runs share."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass


@dataclass(frozen=True)
class _Proc:
    state: str  # one letter: R, S, D... Z (zombie), X (dead); "?" when unknown
    start: str  # start time in clock ticks since boot; "?" when unknown


def _proc(pid: int) -> _Proc | None:
    """The process's state and start time from /proc/<pid>/stat (None when there is
    no such process). The start time tells a process from a later one that reuses
    its pid; the state tells a zombie (exited, not yet reaped) from a live one.
    Where /proc is not available both are "?"."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # Field 2 (comm) may hold spaces and parentheses: split after its ")".
            fields = stat.read().rsplit(")", 1)[1].split()
        return _Proc(state=fields[0], start=fields[19])
    except FileNotFoundError:
        return None if os.path.isdir("/proc") else _Proc("?", "?")
    except (OSError, IndexError):
        return _Proc("?", "?")


def _process_start(pid: int) -> str | None:
    proc = _proc(pid)
    return proc.start if proc else None


def owner_label(pid: int | None = None) -> str:
    """ "hostname:pid:start" of this process (or pid), for the pier.owner label."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_process_start(pid) or '?'}"


# A zombie has exited: it only waits for its parent (or PID 1, which may never
# come: pier in a container without an init) to read its exit status.
_GONE_STATES = frozenset({"Z", "X", "x"})


def owner_alive(label: str) -> bool | None:
    """Whether the process an owner label names is still running; None when it
    ran on another host (or the label is not one pier writes). A zombie is not
    running. This is the one rule for every judgement of an owner: the sweep,
    the server's start-up recovery, and the CLI's ending of orphaned runs."""
    try:
        host, pid_text, start = label.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    proc = _proc(pid)
    if proc is None or proc.state in _GONE_STATES:
        return False
    if proc.start == "?" or start == "?":
        return pid_exists(pid)
    return proc.start == start


def pid_exists(pid: int) -> bool:
    """Whether a process of that pid exists on this host (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
