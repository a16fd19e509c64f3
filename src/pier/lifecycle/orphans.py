"""Runs whose owner is gone: a `pier run` killed with SIGKILL, a server that
crashed. Nothing can finish such a run, so whoever notices first ends it as
failed with the reason, removes its sandbox and its scratch files: the next
`pier` command, the server's periodic sweep, or the server's start-up recovery.

The owner is the "host:pid:start" label of the process that runs the run
(`Trajectory.owner`, the sandbox's `pier.owner` label); whether it still runs
is judged by one rule, `owner_alive`, which the sandbox sweep uses too.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING

from pier.record import RunStatus, Trajectory

if TYPE_CHECKING:
    from pier.db import Store
    from pier.sandbox.base import SandboxBackend
    from pier.settings import Settings

# Every command that looks at runs calls end_orphaned_runs first (`pier runs`,
# `pier logs`), and there is mostly no unfinished run to judge: what judging and
# ending one takes (the process table, the sandbox labels, the run's outcome and
# scratch folder) is imported only when there is one.

log = logging.getLogger(__name__)

Judge = Callable[[Trajectory], bool]
UNFINISHED = (RunStatus.pending, RunStatus.running)


def owner_gone(record: Trajectory) -> bool:
    """The run's owner is known to have ended (a zombie counts as ended). A run
    without an owner (accepted by the server, not started yet) or owned on
    another host is not judged here."""
    from pier.sandbox.owner import owner_alive

    return record.owner is not None and owner_alive(record.owner) is False


def orphan_message(store: Store, record: Trajectory) -> str:
    from pier.lifecycle.outcomes import SERVER_STOPPED

    if store.run_request(record.trajectory_id) is not None:  # the API accepted it: a server ran it
        return SERVER_STOPPED
    pid = (record.owner or "").rsplit(":", 2)[-2:-1] or ["?"]
    return (
        f"the `pier run` process that ran this run (pid {pid[0]}) stopped before the run ended "
        "(it was killed); run it again"
    )


def end_orphaned_runs(
    store: Store,
    settings: Settings,
    backend: Callable[[], SandboxBackend] | None = None,
    judge: Judge = owner_gone,
) -> list[Trajectory]:
    """End every unfinished run `judge` finds orphaned (by default: its owner is
    gone) as failed with the reason, delete its scratch files and, when
    `backend` is given, its sandboxes (a later sweep removes them otherwise:
    their run has ended). The runs ended, for the caller to report."""
    ended = []
    for record in store.runs_with_status(UNFINISHED):
        if judge(record):
            ended.append(end_orphan(store, settings, record))
    if ended and backend is not None:
        remove_sandboxes(backend, {r.trajectory_id for r in ended})
    return ended


def end_orphan(
    store: Store, settings: Settings, record: Trajectory, message: str | None = None
) -> Trajectory:
    """End the run as failed saying `message` (by default orphan_message's)
    and delete its scratch files."""
    from pier.lifecycle.outcomes import end_record
    from pier.lifecycle.scratch import scratch_dir

    message = message or orphan_message(store, record)
    record = end_record(record, RunStatus.failed, message)
    store.save_run(record)
    store.append_event(record.trajectory_id, message, "save")
    shutil.rmtree(scratch_dir(settings, record.trajectory_id), ignore_errors=True)
    log.warning("run %s ended: %s", record.trajectory_id, message)
    return record


def remove_sandboxes(backend: Callable[[], SandboxBackend], trajectory_ids: set[str]) -> int:
    """Remove the sandboxes of these runs; the number removed. Never raises: with
    no engine now, the next sweep removes them (their runs have ended)."""
    from pier.sandbox.base import LABEL_RUN

    try:
        engine = backend()
        doomed = [s.id for s in engine.list_sandboxes() if s.labels.get(LABEL_RUN) in trajectory_ids]
        for sandbox_id in doomed:
            engine.remove(sandbox_id)
    except Exception as exc:  # PierError mostly; whatever it is, the caller has more to do
        log.warning("could not remove the sandboxes of ended runs now (%s); the next sweep will", exc)
        return 0
    return len(doomed)
