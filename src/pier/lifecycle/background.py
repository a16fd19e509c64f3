"""The server's periodic sweep: sandboxes that no live run needs go,
even when nothing else would notice them."""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from pier.db import Store
from pier.db.retry import log_failed_round
from pier.errors import NotFoundError, PierError
from pier.lifecycle.orphans import end_orphaned_runs
from pier.lifecycle.sessions import sweep_status
from pier.lifecycle.uploads import expire_uploads
from pier.record import RunStatus
from pier.sandbox.base import LABEL_RUN, SandboxBackend, SandboxInfo
from pier.sandbox.sweeper import sweep
from pier.settings import Settings
from pier.storage.base import RunStorage
from pier.telemetry import metrics

log = logging.getLogger(__name__)


def run_status_lookup(store: Store) -> Callable[[str], str | None]:
    def status(trajectory_id: str) -> str | None:
        try:
            return store.get_run(trajectory_id).status.value
        except NotFoundError:
            return None

    return status


def sandbox_status_lookup(store: Store) -> Callable[[str], str | None]:
    """What the sweep judges a sandbox by: its run's status, or KEPT while it is
    kept or a later run continues in it (pier.lifecycle.sessions)."""
    return lambda trajectory_id: sweep_status(store, trajectory_id)


class _KnownRunsOnly:
    """A backend as the sweeper sees it, limited to sandboxes of runs in `store`."""

    def __init__(self, backend: SandboxBackend, store: Store):
        self._backend, self._status = backend, sandbox_status_lookup(store)

    def list_sandboxes(self) -> list[SandboxInfo]:
        return [s for s in self._backend.list_sandboxes() if self._status(s.labels.get(LABEL_RUN) or "")]

    def remove(self, sandbox_id: str) -> None:
        self._backend.remove(sandbox_id)


def sweep_once(backend: Callable[[], SandboxBackend], store: Store, settings: Settings) -> int:
    """End the runs whose owner is gone (a killed `pier run`), then sweep; the
    number of sandboxes removed (0 when the engine is down)."""
    for record in end_orphaned_runs(store, settings):
        log.warning("run %s ended: its owner process %s is gone", record.trajectory_id, record.owner)
    try:
        engine = backend()
        scope = engine if settings.sweep_foreign else cast(SandboxBackend, _KnownRunsOnly(engine, store))
        swept = sweep(scope, sandbox_status_lookup(store), grace_sec=settings.sweep_grace_sec)
    except PierError as exc:  # no engine now: try again next time
        log.warning("sweep skipped: %s", exc)
        return 0
    metrics.sandboxes_swept.inc(len(swept))
    for item in swept:
        log.info("swept sandbox %s of run %s: %s", item.id[:12], item.trajectory_id, item.reason)
    return len(swept)


_TRAJECTORY_ID = re.compile(r"^[0-9a-f]{32}$")


def clear_scratch(store: Store, settings: Settings, now: float | None = None) -> int:
    """Delete the scratch folders (and input copies) that runs left when their
    process died before publishing: those of ended runs, and of runs the store
    does not know once they are older than PIER_SWEEP_GRACE_SEC. How many went."""
    now = time.time() if now is None else now
    status = run_status_lookup(store)
    root = settings.scratch_root
    removed = 0
    for folder in _children(root):
        if not _TRAJECTORY_ID.match(folder.name) or folder.is_symlink():
            continue
        state = status(folder.name)
        ended = state is not None and RunStatus(state).terminal
        stale = state is None and now - folder.stat().st_mtime > settings.sweep_grace_sec
        if ended or stale:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
            log.info("deleted the scratch folder %s left by run %s", folder, folder.name)
    return removed


def _children(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


class PeriodicSweeper:
    def __init__(
        self,
        backend: Callable[[], SandboxBackend],
        store: Store,
        settings: Settings,
        storage: RunStorage | None = None,
    ):
        def sweep_round() -> None:
            sweep_once(backend, store, settings)
            if storage is not None:  # uploads nobody used go too, and multipart uploads left open
                expire_uploads(storage, store, settings.upload_ttl_sec)
                storage.abort_abandoned_uploads(settings.storage_abandoned_upload_sec)
            clear_scratch(store, settings)

        self._sweep = sweep_round
        self._interval = settings.sweep_interval_sec
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pier-sweeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._sweep()
            except Exception as exc:  # the next round may do better; the thread must live on
                log_failed_round(log, "sweep failed", exc)
