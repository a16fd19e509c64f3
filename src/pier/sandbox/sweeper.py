"""The sweep: delete sandboxes whose run is over, unknown, past its
deadline, or owned by a process that died, so an interrupted run leaves nothing
behind. The decision is a pure function of labels, so it is tested without an engine.
"""

from __future__ import annotations

import logging
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
from pier.sandbox.owner import owner_alive

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
