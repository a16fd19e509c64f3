"""Starting runs: what the CLI, the API and the executors share."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pier.errors import PierError
from pier.lifecycle.context import LogSink, RunContext, scratch_dir
from pier.lifecycle.interrupts import interruption_reason
from pier.lifecycle.logwriter import RunLogWriter
from pier.lifecycle.outcomes import end_record
from pier.lifecycle.request import RunRequest, preflight
from pier.lifecycle.runner import execute
from pier.lifecycle.wiring import Services
from pier.names import check_name
from pier.record import RunStatus, StageRecord, Trajectory
from pier.redact import Redactor
from pier.sandbox.base import SandboxBackend
from pier.sandbox.owner import owner_label
from pier.settings import Settings

# Services and RunRequest live in light modules of their own (read-only commands
# import them without the runner); callers keep importing them from here.
__all__ = ["Observer", "RunRequest", "Services", "new_context", "preflight", "run"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Observer:
    """Callbacks for a live view of a run (the CLI's progress)."""

    on_log: Callable[[str, str], None] | None = None
    on_step: Callable[[StageRecord], None] | None = None


def new_context(
    services: Services,
    request: RunRequest,
    observer: Observer | None = None,
    record: Trajectory | None = None,
) -> RunContext:
    """A context for a new run; `record` is the run's pending record when it was
    stored earlier (the API accepts a run before it starts)."""
    on_log = observer.on_log if observer else None
    store = services.run_store
    if record is None:
        # This process runs it from now on: if it dies, whoever notices ends the run.
        record = Trajectory.new(
            request.trajectory_id, request.collection, request.task_name, owner=owner_label()
        )
        store.create_run(record)
        backend = _backend_or_end(services, record)
    elif request.task.is_workflow:  # its steps use no sandbox (a runbook child gets its own context)
        backend = cast(SandboxBackend, None)
    else:
        backend = services.backend

    tid = record.trajectory_id
    # Lines are gathered into few writes (logwriter.py); the live view sees each once it is stored.
    writer = RunLogWriter(
        lambda lines, stage: store.append_events(tid, lines, stage),
        stored=(lambda stage, line: _observe(on_log, stage, line)) if on_log is not None else None,
    )

    def save_record(saved: Trajectory) -> object:
        # A record never says more than its stored lines do. A failed write of
        # them is raised at the run's next line: it never keeps the record unsaved.
        writer.flush(raise_error=False)
        return store.save_run(saved)

    sink: LogSink = writer
    on_step = observer.on_step if observer else None
    return RunContext(
        task=request.task,
        run_params=dict(request.run_params),
        inputs=request.inputs(),
        record=record,
        settings=services.settings,
        backend=backend,
        output_dir=outputs_dir(services.settings, record.trajectory_id),
        emit=sink,
        flush_log=lambda: writer.flush(raise_error=False),
        save_record=save_record,
        redactor=Redactor(request.env.values()),
        on_step=(lambda step: _observe(on_step, step)) if on_step else None,
        storage=services.storage,
        pool=services.pool,
        store=store,
    )


def outputs_dir(settings: Settings, trajectory_id: str) -> Path:
    """The run's outputs in its scratch folder, empty; published to storage at save."""
    path = scratch_dir(settings, check_name("trajectory", trajectory_id)) / "outputs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _backend_or_end(services: Services, record: Trajectory) -> SandboxBackend:
    """The engine, or the new run ends failed saying why (e.g. no engine answers):
    a run that cannot start must never stay pending."""
    try:
        return services.backend
    except BaseException as exc:
        if isinstance(exc, PierError):
            ended = end_record(record, RunStatus.failed, str(exc))
        else:  # interrupted while connecting
            ended = end_record(
                record, RunStatus.cancelled, f"the run was interrupted: {interruption_reason(exc)}"
            )
        services.store.save_run(ended)
        services.store.append_event(record.trajectory_id, ended.error or "", "prepare")
        raise


def _observe(callback: Callable[..., None], *args: object) -> None:
    """A live view must never stop a run: a console that went away (the terminal
    closed, a broken pipe) only loses the view."""
    try:
        callback(*args)
    except Exception as exc:
        log.debug("run observer failed: %s", exc)


def run(services: Services, request: RunRequest, observer: Observer | None = None) -> Trajectory:
    return execute(new_context(services, request, observer))
