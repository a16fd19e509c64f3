"""Sandboxes that outlive one agent exit (docs/sessions.md).

- Keep: a run with `keep_sandbox` leaves its sandbox standing when it ends (not
  when it was cancelled or its sandbox broke), with nothing of pier's in it
  (credential files and /run/pier deleted, what the agent left running
  stopped), until `kept_until` on the run's record (PIER_KEEP_TTL_SEC after its
  end); the sweep deletes it after.
- Continue: a run with `continue_from` claims that run's kept sandbox instead
  of creating one: the claim is written on the earlier run's record
  (`continued_by`) as a compare-and-set in the store (Store.swap_run), so the
  sandbox is in use by one run at a time across every process of a fleet, and
  the new run's record names its `parent`. It may keep the sandbox again.
  A pause, a resume or a snapshot save holds it the same way while it works
  (`continued_by` is HOLD + what it does, cleared after).
- The sweep asks `sweep_status` what a sandbox's run is: a sandbox is labelled
  with the run that made it, so the chain of runs that continued in it is
  followed to its last run; a kept one not yet expired, or one a continuing run
  is using, is KEPT (never swept for its first run's deadline or owner).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pier.errors import InputError, NotFoundError, SandboxError, StageError
from pier.record import RunStatus, SandboxRecord, StageStatus, Trajectory
from pier.sandbox.base import Sandbox, SandboxBackend, SandboxSource
from pier.sandbox.sweeper import KEPT

if TYPE_CHECKING:
    from pier.db import Store
    from pier.lifecycle.context import RunContext

FINAL = frozenset({RunStatus.completed, RunStatus.failed, RunStatus.cancelled})
DAY_SEC = 86400  # a run's longest life before it ends, at most (its limits are far below)
MAX_CHAIN = 1000  # runs continued in one sandbox, followed at most (a loop in the records ends there)
_CLAIM = threading.Lock()  # one claim at a time in this process: read, check, write


def wants_keep(ctx: RunContext) -> bool:
    plan = ctx.plan
    return plan is not None and plan.keep_sandbox


def continued(ctx: RunContext) -> bool:
    plan = ctx.plan
    return plan is not None and plan.continue_from is not None


def claim_kept(ctx: RunContext) -> Sandbox:
    """The kept sandbox of the plan's continue_from, claimed for this run; a
    StageError("create") saying why not when it is gone, expired, another
    collection's or in use."""
    plan, store = ctx.require_plan(), ctx.store
    parent_id = plan.continue_from
    assert parent_id is not None
    if store is None:
        raise StageError("create", "continue_from needs the runs' database, which this run has none of")
    with _CLAIM:  # in this process one at a time; across processes the store's compare-and-set decides
        kept, sandbox = _claim(ctx, store, parent_id, plan.collection)
    record = ctx.record
    record.parent = parent_id
    record.outputs.sandbox = kept.model_copy(update={"continued_by": None, "kept_until": None, "pool": None})
    ctx.image = kept.image
    assert kept.id is not None  # _claim attached the sandbox by it
    ctx.log(f"continuing in the kept sandbox {kept.id[:12]} of run {parent_id}")
    return sandbox


HOLD = "pier:"  # continued_by while a command (a snapshot save, a pause) holds the sandbox: no run id
CLAIM_TRIES = 20  # reads of the parent a claim makes at most while other writes to it come first


def _claim(ctx: RunContext, store: Store, parent_id: str, collection: str) -> tuple[SandboxRecord, Sandbox]:
    """Check the parent's kept sandbox, attach it, then write the claim as a
    compare-and-set on the parent's record: of runs that claim it at once (in
    any process of a fleet, on SQLite or PostgreSQL) exactly one writes; the
    others read it again and are refused as "in use"."""
    for _ in range(CLAIM_TRIES):
        parent, seen = continuable(store, parent_id, collection)
        kept = parent.outputs.sandbox
        assert kept.id is not None
        try:
            if ctx.backend.paused(kept.id):  # paused while kept: a run needs it running
                ctx.backend.resume(kept.id)
            sandbox = ctx.backend.attach(kept.id)
        except SandboxError as exc:
            raise StageError(
                "create",
                f"cannot continue from run {parent_id}: its kept sandbox is gone ({exc}); "
                "start the runbook without --continue-from",
            ) from None
        kept.continued_by, kept.kept_until = ctx.record.trajectory_id, None
        if store.swap_run(parent, seen):
            return kept, sandbox
    raise StageError("create", f"cannot continue from run {parent_id}: its record kept changing; try again")


def continuable(
    store: Store, parent_id: str, collection: str, now: float | None = None
) -> tuple[Trajectory, datetime]:
    """The record of run parent_id (and the version read) when a run of
    `collection` may continue in its kept sandbox now, as far as its record
    says (the engine is asked when the sandbox is attached); else the
    StageError("create") a claim fails with, in its words. A form asks it
    before it starts a run; the claim asks it again and decides."""
    parent, seen = _parent(store, parent_id, collection)
    refuse = _refusal(parent, time.time() if now is None else now)
    if refuse:
        raise StageError("create", f"cannot continue from run {parent_id}: {refuse}")
    return parent, seen


def _parent(store: Store, parent_id: str, collection: str) -> tuple[Trajectory, datetime]:
    try:
        return store.get_run_seen(parent_id, collection)
    except NotFoundError:  # another collection's run is as unknown as one that never was
        raise StageError(
            "create",
            f"cannot continue from run {parent_id}: no such run in collection {collection!r}; "
            "give the trajectory id of a run of this collection that kept its sandbox (--keep)",
        ) from None


def _refusal(parent: Trajectory, now: float) -> str | None:
    kept = parent.outputs.sandbox
    if parent.status not in FINAL:
        return f"it is still {parent.status.value}; wait for it to end"
    if kept.continued_by and kept.continued_by.startswith(HOLD):
        return f"another command is at its sandbox ({kept.continued_by[len(HOLD) :]}); try again in a moment"
    if kept.continued_by:
        return (
            f"its sandbox is in use by run {kept.continued_by} (or was: a sandbox serves one run at a time)"
        )
    if kept.kept_until is None or kept.id is None:
        return "its sandbox was not kept: run the first runbook with --keep (init_params.keep_sandbox: true)"
    if now > kept.kept_until:
        return (
            f"its sandbox expired {now - kept.kept_until:.0f} s ago (PIER_KEEP_TTL_SEC) and is deleted; "
            "start the runbook without --continue-from"
        )
    return None


def keep(ctx: RunContext) -> bool:
    """Whether the run's sandbox stays after it (and its record says until
    when), instead of being deleted."""
    sandbox = ctx.sandbox
    if sandbox is None or not wants_keep(ctx) or ctx.cancel.is_set():
        return False
    record = ctx.record
    broken = sandbox.limit_reached()
    if broken or record.failed_stage in ("prepare", "create", "setup"):
        ctx.log(f"the sandbox is not kept: {broken or 'the run failed before its agent started'}", "save")
        return False
    if record.stage("cleanup_credentials").status != StageStatus.completed:
        ctx.log("the sandbox is not kept: its credentials could not be removed", "save")
        return False
    until = time.time() + ctx.settings.keep_ttl_sec
    record.outputs.sandbox.kept_until = round(until, 3)
    record.outputs.sandbox.continued_by = None
    ctx.log(
        f"sandbox {sandbox.id[:12]} kept for {ctx.settings.keep_ttl_sec} s (PIER_KEEP_TTL_SEC): "
        f"continue with `pier run RUNBOOK --continue-from {record.trajectory_id}`",
        "save",
    )
    return True


def sweep_status(store: Store, trajectory_id: str, now: float | None = None) -> str | None:
    """The status the sweep judges a sandbox labelled with this run by: KEPT
    while it is kept (and not expired) or a later run continues in it; else the
    status of the last run that had it (None: unknown to the store)."""
    now = time.time() if now is None else now
    try:
        record = store.get_run(trajectory_id)
    except NotFoundError:
        return None
    first = record
    for _ in range(MAX_CHAIN):
        successor = record.outputs.sandbox.continued_by
        if not successor:
            break
        try:
            record = store.get_run(successor, record.collection)
        except NotFoundError:
            break
    kept_until = record.outputs.sandbox.kept_until
    if record.status in FINAL:
        return KEPT if kept_until is not None and now <= kept_until else record.status.value
    return KEPT if record is not first else record.status.value


def kept_sandboxes(
    store: Store, collection: str, ttl_sec: float, now: float | None = None
) -> list[Trajectory]:
    """The collection's runs whose sandbox is kept now (not expired, not taken by
    a continuing run): those ended within the last PIER_KEEP_TTL_SEC."""
    now = time.time() if now is None else now
    since = datetime.fromtimestamp(now - ttl_sec - DAY_SEC, tz=UTC)  # created before it ended
    records, _total = store.list_runs(collection, limit=1000, statuses=FINAL, since=since)
    return [
        r
        for r in records
        if r.outputs.sandbox.kept_until is not None
        and now <= r.outputs.sandbox.kept_until
        and not r.outputs.sandbox.continued_by
    ]


# --- snapshots from a run -------------------------------------------------------

SNAPSHOT_REPOSITORY = "pier-snapshot"
SNAPSHOT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
LABEL_SNAPSHOT_COLLECTION = "pier.snapshot.collection"
LABEL_SNAPSHOT_NAME = "pier.snapshot.name"
LABEL_SNAPSHOT_RUN = "pier.snapshot.run"
# What is removed before a kept sandbox is saved: pier's own files and the logs
# (the run's copy is in its outputs, redacted; the sandbox's is not).
SCRUB = "rm -rf -- /run/pier /logs/agent /app/checks; mkdir -p /logs/agent"


def snapshot_ref(collection: str, name: str) -> str:
    """The image a collection's snapshot NAME is saved as: named by a digest of
    the collection, so no collection's snapshot is another's."""
    digest = hashlib.sha256(collection.encode()).hexdigest()[:20]
    return f"{SNAPSHOT_REPOSITORY}:{digest}-{name}"


def collection_snapshot(backend: SandboxBackend, collection: str, name: str | None) -> SandboxSource | None:
    """The collection's own snapshot NAME (saved from a run), when it has one."""
    if not name or not SNAPSHOT_NAME.fullmatch(name):
        return None
    ref = snapshot_ref(collection, name)
    if not backend.image_exists(ref):
        return None
    return SandboxSource(
        kind="snapshot",
        name=name,
        image=ref,
        log_line=f"Creating sandbox from snapshot: {name} (saved from a run)",
    )


def save_snapshot(
    store: Store, backend: SandboxBackend, collection: str, trajectory_id: str, name: str
) -> str:
    """Save the kept sandbox of run `trajectory_id` (of `collection`) as the
    collection's snapshot `name`, pier's files and the logs removed first; the
    image ref. InputError for a bad name; NotFoundError for another collection's
    run; ConflictError-like InputError when the sandbox is not kept."""
    if not SNAPSHOT_NAME.fullmatch(name):
        raise InputError(
            f"invalid snapshot name {name!r}: lowercase letters, digits, '.', '_', '-' (at most 64)"
        )
    with (
        _CLAIM,
        _held(
            store, backend, collection, trajectory_id, "snapshot save", "save a snapshot from run"
        ) as sandbox_id,
    ):
        try:
            if backend.paused(sandbox_id):
                backend.resume(sandbox_id)
            sandbox = backend.attach(sandbox_id)
        except SandboxError as exc:
            raise InputError(
                f"cannot save a snapshot from run {trajectory_id}: its kept sandbox is gone ({exc})"
            ) from None
        scrubbed = sandbox.exec(SCRUB, workdir="/", timeout=60)
        if not scrubbed.ok:
            raise SandboxError(f"could not remove pier's files before saving: {scrubbed.output[-300:]}")
        labels = {
            LABEL_SNAPSHOT_COLLECTION: collection,
            LABEL_SNAPSHOT_NAME: name,
            LABEL_SNAPSHOT_RUN: trajectory_id,
        }
        return backend.commit(sandbox_id, snapshot_ref(collection, name), labels)


# --- pause and resume ------------------------------------------------------------


def pause_kept(
    store: Store, backend: SandboxBackend, collection: str, trajectory_id: str, pause: bool
) -> str:
    """Pause (or resume) the kept sandbox of a run of `collection`; its id.
    Refused like a continuation when it is not kept, expired or in use."""
    verb = "pause" if pause else "resume"
    with (
        _CLAIM,
        _held(store, backend, collection, trajectory_id, verb, f"{verb} the sandbox of run") as sandbox_id,
    ):
        (backend.pause if pause else backend.resume)(sandbox_id)
    return sandbox_id


@contextmanager
def _held(
    store: Store, backend: SandboxBackend, collection: str, trajectory_id: str, verb: str, doing: str
) -> Iterator[str]:
    """The run's kept sandbox (its id), held for one command: `continued_by`
    is set to HOLD + verb by a compare-and-set on the run's record, as a
    continuing run's claim is, so neither a run nor another command of any
    process of a fleet takes it meanwhile (they are refused as in use); it is
    let go after. InputError when it is not kept, expired, in use or gone."""
    marker = HOLD + verb
    for _ in range(CLAIM_TRIES):
        record, seen = store.get_run_seen(trajectory_id, collection)  # NotFoundError: another collection's
        refuse = _refusal(record, time.time())
        if refuse:
            raise InputError(f"cannot {doing} {trajectory_id}: {refuse}")
        kept = record.outputs.sandbox
        assert kept.id is not None
        try:
            backend.attach(kept.id)
        except SandboxError as exc:
            raise InputError(f"cannot {doing} {trajectory_id}: its kept sandbox is gone ({exc})") from None
        kept.continued_by = marker
        if store.swap_run(record, seen):
            break
    else:
        raise InputError(f"cannot {doing} {trajectory_id}: its record kept changing; try again")
    try:
        yield kept.id
    finally:
        for _ in range(CLAIM_TRIES):  # let go: only the hold this command wrote
            record, seen = store.get_run_seen(trajectory_id, collection)
            if record.outputs.sandbox.continued_by != marker:
                break
            record.outputs.sandbox.continued_by = None
            if store.swap_run(record, seen):
                break
