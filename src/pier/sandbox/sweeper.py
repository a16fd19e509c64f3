"""The sweep: delete sandboxes whose run is over, unknown, past its
deadline, or owned by a process that died, so an interrupted run leaves nothing
behind. The decision is a pure function of labels, so it is tested without an engine.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pier.sandbox.base import (
    LABEL_CREATED,
    LABEL_DEADLINE,
    LABEL_OWNER,
    LABEL_RUN,
    SandboxBackend,
    SandboxInfo,
)

log = logging.getLogger(__name__)

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
# What a run-status lookup answers for a sandbox kept after its run, or in use by
# a run that continues in it (pier.lifecycle.sessions): never swept for its labels.
KEPT = "kept"
RunStatus = Callable[[str], "str | None"]


@dataclass(frozen=True)
class SweptSandbox:
    id: str
    trajectory_id: str | None
    reason: str


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
        return _pid_exists(pid)
    return proc.start == start


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _epoch(labels: Mapping[str, str], key: str) -> float | None:
    try:
        return float(labels[key])
    except (KeyError, ValueError):
        return None


def sweep_reason(info: SandboxInfo, status: str | None, now: float, grace_sec: float) -> str | None:
    """Why this sandbox should go, or None to keep it. status is its run's status
    in the store (None when the store does not know the run)."""
    labels = info.labels
    created = _epoch(labels, LABEL_CREATED)
    age = now - created if created is not None else None
    old = age is None or age > grace_sec
    if status == KEPT:
        return None
    if status in TERMINAL_STATUSES:
        return f"its run is {status}"
    deadline = _epoch(labels, LABEL_DEADLINE)
    if deadline is not None and now > deadline:
        return f"it is {now - deadline:.0f}s past its deadline"
    owner = labels.get(LABEL_OWNER)
    alive = owner_alive(owner) if owner else None
    if alive is False:
        return f"its owner process ({owner}) is gone"
    if not info.running and old:
        return "it is not running"
    if alive:
        # A live process on this host owns it, maybe with another store (a CLI run
        # beside a server): only that process, its deadline or its run's end removes it.
        return None
    if status is None and old:
        return "its run is unknown to the store" + (f" ({age:.0f}s old)" if age is not None else "")
    return None


def sweep(
    backend: SandboxBackend,
    run_status: RunStatus,
    now: float | None = None,
    grace_sec: float = 300,
) -> list[SweptSandbox]:
    """Remove every sandbox pier made that no live run needs; return what went and why."""
    now = time.time() if now is None else now
    swept = []
    for info in backend.list_sandboxes():
        trajectory_id = info.labels.get(LABEL_RUN) or None
        try:
            status = run_status(trajectory_id) if trajectory_id else None
        except Exception as exc:  # the store is down: keep what we cannot judge
            log.warning("sweep: status of run %s unavailable (%s); keeping it", trajectory_id, exc)
            continue
        reason = sweep_reason(info, status, now, grace_sec)
        if reason:
            log.info("sweep: removing sandbox %s of run %s: %s", info.id[:12], trajectory_id, reason)
            backend.remove(info.id)
            swept.append(SweptSandbox(id=info.id, trajectory_id=trajectory_id, reason=reason))
    return swept
