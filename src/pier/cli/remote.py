"""`pier run --remote`: the run goes to a fleet (PIER_EXECUTOR=temporal) through
the executor `pier serve` uses: accepted as the API accepts a run (checked,
stored pending with its request), then one workflow per run, workflow id = the
run's id, executed by some `pier worker`. This process runs nothing: it follows
the run's log in the fleet's store, woken by the PostgreSQL bus the servers'
live followers use, and prints it as a local `pier run` does.

Attached files are stored as an upload in the fleet's storage (as
POST /sandbox/upload stores them) and the run names them by their storage
paths, which every worker can read; host environment values the runbook's
secrets name go as secret_params, sealed in the workflow's input.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pier.cli.console import err, out
from pier.errors import InputError

if TYPE_CHECKING:
    from pier.cli.progress import Progress
    from pier.db import Store
    from pier.executors.temporal import TemporalExecutor
    from pier.lifecycle.start import Observer, RunRequest, Services
    from pier.record import Trajectory
    from pier.server.pgbus import PgBus
    from pier.settings import Settings

BATCH = 500
POLL_SEC = 1.0  # the store is read this often even without a wake-up
CANCEL_WAIT_SEC = 60.0  # after Ctrl-C, how long to wait for the worker to end the run


def missing_fleet_settings(settings: Settings) -> list[str]:
    """The settings a fleet submission needs and `settings` lacks, each saying
    what to set. The defaults (this host's SQLite, key file and disk) would
    submit runs that no worker on another host could read."""
    from pier.db.engine import is_postgres

    missing = []
    if settings.executor != "temporal":
        missing.append("PIER_EXECUTOR=temporal")
    if "temporal_address" not in settings.model_fields_set:
        missing.append("PIER_TEMPORAL_ADDRESS (the fleet's Temporal, host:port)")
    if not settings.database_url or not is_postgres(settings.database_url):
        missing.append("PIER_DATABASE_URL (the fleet's PostgreSQL, postgresql+psycopg://...)")
    if settings.secret_key is None:
        missing.append("PIER_SECRET_KEY (the fleet's vault key)")
    if settings.storage_url is None:
        missing.append(
            "PIER_STORAGE_URL (storage every worker reaches: s3://BUCKET/PREFIX, or file:///PATH on a shared disk)"
        )
    return missing


def upload_files(services: Services, collection: str, files: list[Path]) -> list[str]:
    """Store the attached files as one upload of `collection`; their storage paths."""
    from pier.lifecycle.assets import AssetLimits
    from pier.lifecycle.files import save_checked_uploads

    if not files:
        return []
    for path in files:
        if not path.expanduser().is_file():
            raise InputError(f"--file: {str(path)!r} is not a file: check the path")
    with contextlib.ExitStack() as stack:
        streams = [(p.name, stack.enter_context(open(p.expanduser(), "rb"))) for p in files]
        settings = services.settings
        _, paths = save_checked_uploads(
            services.storage, collection, streams, AssetLimits.of(settings), settings.scratch_root
        )
    return paths


class RemoteRun:
    """One run submitted to the fleet, and what follows it."""

    def __init__(self, services: Services):
        from pier.executors.ports import LifecycleHooks, RunPorts
        from pier.executors.temporal import TemporalExecutor
        from pier.server.pgbus import PgBus
        from pier.vault import load_vault

        settings = services.settings
        self.services = services
        self.store: Store = services.store
        self.bus: PgBus = PgBus(settings.db_url)
        # no webhook sender: in a fleet the run's workflow delivers webhooks
        self.hooks = LifecycleHooks(RunPorts(services, load_vault(settings), self.bus.publish, None))
        self.executor: TemporalExecutor = TemporalExecutor(settings, self.hooks)

    def submit(self, request: RunRequest) -> Trajectory:
        """Accept the run as the API does and start its workflow."""
        from pier.server.dispatcher import Dispatcher, RunParams

        self.executor.connect()
        self.bus.start()
        self.store.create_collection(request.collection)
        params = RunParams(init_params=dict(request.run_params), secret_params=dict(request.env))
        dispatcher = Dispatcher(self.hooks, self.executor)
        return dispatcher.accept_task(request.collection, request.task_name, request.task, params)

    def follow(
        self, trajectory_id: str, observer: Observer | None, give_up: float | None = None
    ) -> Trajectory:
        """Print the run's lines and stage changes until it has ended and every
        line is printed; with `give_up` (seconds), return the record as it is then."""
        import time

        wake = self.bus.wake_on(trajectory_id)
        seq, seen = 0, dict[str, str]()
        deadline = None if give_up is None else time.monotonic() + give_up
        while True:
            wake.clear()  # before reading: a line written meanwhile wakes the next wait
            record = self.store.get_run(trajectory_id)
            events = self.store.events(trajectory_id, seq, BATCH)
            for event in events:
                if observer and observer.on_log:
                    observer.on_log(event.stage or "", event.line)
                seq = event.seq
            for stage in record.stages:
                if seen.get(stage.name) != stage.status:
                    seen[stage.name] = stage.status
                    if observer and observer.on_step:
                        observer.on_step(stage)
            if len(events) == BATCH:
                continue
            if record.status.terminal or (deadline is not None and time.monotonic() > deadline):
                return record  # the status was read first: every line of an ended run is in
            wake.wait(POLL_SEC)

    def close(self) -> None:
        self.executor.stop()
        self.bus.close()


def run_remote(build: Callable[[], RunRequest], files: list[Path], as_json: str | None) -> int:
    """Submit, follow, print the summary (or the record with --json); the exit code."""
    from pydantic import ValidationError

    from pier.cli.progress import Progress
    from pier.cli.summary import record_json, show_summary, validation_message
    from pier.lifecycle.interrupts import Interrupted, deferred_signals, stop_signals_interrupt
    from pier.lifecycle.wiring import Services
    from pier.settings import get_settings

    settings = get_settings()
    missing = missing_fleet_settings(settings)
    if missing:
        raise InputError(
            "pier run --remote submits the run to a fleet (PIER_EXECUTOR=temporal) and needs the "
            f"settings its servers and workers have; set {'; '.join(missing)}"
        )
    services = Services(settings)
    try:
        request = build()
        paths = upload_files(services, request.collection, files)
    except ValidationError as exc:
        raise InputError(validation_message(exc)) from None
    if paths:
        request = replace(request, run_params={**request.run_params, "file_paths": paths})
    logging.getLogger("temporalio").setLevel(logging.ERROR)  # its retries would print between lines
    remote = RemoteRun(services)
    progress = None if as_json else Progress(err)
    code: int | None = None
    record: Trajectory | None = None
    try:
        with stop_signals_interrupt():
            try:
                with deferred_signals():  # a run stored but never started would wait for ever
                    record = remote.submit(request)
                if progress:
                    progress.start(replace(request, trajectory_id=record.trajectory_id))
                record = remote.follow(record.trajectory_id, progress.observer() if progress else None)
            except Interrupted as exc:
                code = exc.exit_code
                if record is None:
                    raise
                record = cancel(remote, record, progress)
    finally:
        if progress:
            with contextlib.suppress(OSError):
                progress.stop()
        remote.close()
    with contextlib.suppress(OSError):  # the terminal went away: the run's record is kept all the same
        if as_json:
            print(record_json(record, raw=as_json == "raw", indent=2))
        else:
            show_summary(record, services.storage.where(record.storage_path))
    return code if code is not None else 0 if record.success else 1


def cancel(remote: RemoteRun, record: Trajectory, progress: Progress | None) -> Trajectory:
    """Ctrl-C: cancel the run's workflow (its worker deletes the sandbox) and
    follow it to its end for a while; further signals are ignored meanwhile."""
    tid = record.trajectory_id
    how = f"cancel it with POST /api/v1/trajectory/{record.collection}/{record.task}/statuses {{{tid!r}: 'cancelled'}}"
    err.print(f"[yellow]cancelling run {tid} on its worker …[/yellow]", highlight=False)
    try:
        remote.executor.cancel(tid)
    except Exception as exc:  # Temporal went away: the run goes on
        err.print(f"[red]could not cancel run {tid} ({exc}); it keeps running: {how}[/red]", highlight=False)
        return remote.store.get_run(tid)
    ended = remote.follow(tid, progress.observer() if progress else None, give_up=CANCEL_WAIT_SEC)
    if not ended.status.terminal:
        out.print(
            f"run {tid} has not ended after {CANCEL_WAIT_SEC:.0f}s; `pier logs -f {tid}` follows it, or {how}",
            highlight=False,
        )
    return ended
