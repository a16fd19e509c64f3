"""Keeping what a run made through disk and storage faults.

- Before collect copies the outputs out of the sandbox, the scratch disk
  must hold them and still keep PIER_DISK_RESERVE_BYTES free (and so must the
  database's disk, for a database in a file): else the stage fails at once,
  naming the disk, instead of filling it (a full disk then fails the record's
  own save, and every other run).
- Save publishes the outputs all or nothing: a storage error is tried again
  with a growing wait for up to PIER_STORAGE_RETRY_SEC while the outputs stay
  in scratch and the sandbox stays; when the budget is spent, the record
  lists no outputs and the error says nothing of them was kept.
"""

from __future__ import annotations

import errno
import logging
import shutil
import time
from pathlib import Path

from pier.errors import InputError, StageError
from pier.lifecycle.context import RunContext

log = logging.getLogger(__name__)

MB = 1 << 20
FIRST_WAIT_SEC = 1.0
MAX_WAIT_SEC = 15.0


def check_room(ctx: RunContext, need: int | None) -> None:
    """StageError("collect") when outputs of `need` bytes (what the sandbox's
    output folders hold; None: unknown) would leave less than the reserve free."""
    reserve = ctx.settings.disk_reserve_bytes
    if reserve <= 0:
        return
    need = need or 0
    scratch = ctx.output_dir
    free = shutil.disk_usage(scratch).free
    if free < need + reserve:
        raise StageError("collect", (
            f"the scratch disk ({ctx.settings.scratch_root}) has {free / MB:.0f} MB free; the run's outputs "
            f"need {need / MB:.0f} MB and PIER_DISK_RESERVE_BYTES keeps {reserve / MB:.0f} MB free: nothing "
            "was collected. Free space there, point PIER_SCRATCH_DIR at a larger disk, or have the runbook "
            "write less"
        ))  # fmt: skip
    database = database_file(ctx.settings.db_url)
    if database is not None and not _same_disk(database.parent, scratch):
        free = shutil.disk_usage(database.parent).free
        if free < reserve:
            raise StageError("collect", (
                f"the database's disk ({database.parent}) has {free / MB:.0f} MB free, less than "
                f"PIER_DISK_RESERVE_BYTES ({reserve / MB:.0f} MB): the run's end could not be recorded. "
                "Free space there"
            ))  # fmt: skip


def no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC


def full_scratch(ctx: RunContext) -> StageError:
    return StageError("collect", (
        f"the scratch disk ({ctx.settings.scratch_root}) filled up while the outputs were copied out of "
        "the sandbox: nothing was kept. Free space there, point PIER_SCRATCH_DIR at a larger disk, or "
        "have the runbook write less"
    ))  # fmt: skip


def database_file(url: str) -> Path | None:
    prefix = "sqlite:///"
    return Path(url[len(prefix) :]) if url.startswith(prefix) else None


def _same_disk(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_dev == b.stat().st_dev
    except OSError:
        return False


def publish_retried(ctx: RunContext) -> None:
    """ctx.publish(), tried again while storage fails, up to PIER_STORAGE_RETRY_SEC."""
    budget = ctx.settings.storage_retry_sec
    deadline = time.monotonic() + budget
    wait, tries = FIRST_WAIT_SEC, 0
    while True:
        try:
            ctx.publish()
        except InputError:
            raise
        except Exception as exc:
            tries += 1
            left = deadline - time.monotonic()
            if left <= 0 or ctx.cancel.is_set():
                raise StorageGaveUp(tries, budget, exc) from exc
            pause = min(wait, left)
            ctx.log(f"storing the outputs failed ({_short(exc)}); trying again in {pause:.0f}s: they stay "
                    "on this host until stored", "save")  # fmt: skip
            time.sleep(pause)
            wait = min(wait * 2, MAX_WAIT_SEC)
            continue
        if tries:
            ctx.log(f"outputs stored after {tries} failed attempt(s)", "save")
        return


class StorageGaveUp(Exception):
    def __init__(self, tries: int, budget: float, cause: BaseException):
        super().__init__(
            f"storage failed {tries} time(s) over {budget:.0f}s (PIER_STORAGE_RETRY_SEC): {_short(cause)}"
        )


def save_outputs(ctx: RunContext) -> None:
    """Save's publishing: all or nothing, or the stage fails saying what was kept."""
    try:
        publish_retried(ctx)
    except StorageGaveUp as exc:
        ctx.record.set_results([], [])  # the record lists only what is stored: nothing
        shutil.rmtree(ctx.output_dir, ignore_errors=True)  # and the end's run.json does not carry them later
        _forget_partial(ctx)
        raise StageError(
            "save", f"the run's outputs were not stored ({exc}): none of them was kept"
        ) from None


def _forget_partial(ctx: RunContext) -> None:
    """What a failed publish stored part of goes (storage may answer again now)."""
    if ctx.storage is None:
        return
    try:
        ctx.storage.delete(ctx.record.storage_path)
    except Exception as exc:  # storage still down: the record lists none of it anyway
        log.warning("could not delete the partial outputs of %s: %s", ctx.record.trajectory_id, exc)


def _short(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
