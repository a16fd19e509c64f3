"""Starting runs: what the CLI, the API and the executors share."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, cast

from pier.db import Store
from pier.db.retry import RetryingStore
from pier.errors import PierError
from pier.lifecycle.context import LogSink, RunContext, scratch_dir
from pier.lifecycle.interrupts import interruption_reason
from pier.lifecycle.outcomes import end_record
from pier.lifecycle.plan import FileResolver, RunInputs, RunPlan, plan_run
from pier.lifecycle.pool import WarmPool
from pier.lifecycle.runner import execute
from pier.names import check_collection_name, check_name
from pier.record import RunStatus, StageRecord, Trajectory
from pier.redact import Redactor
from pier.sandbox import get_backend
from pier.sandbox.base import SandboxBackend
from pier.sandbox.sweeper import owner_label
from pier.settings import Settings, get_settings, make_private_dir
from pier.storage import RunStorage, open_storage
from pier.tasks.model import Task
from pier.telemetry import metrics

log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings = field(default_factory=get_settings)
    pool: WarmPool | None = None  # set and started by a long-lived process (pier serve)

    def start_pool(self) -> WarmPool | None:
        """Start the warm pool PIER_WARM_POOL asks for (none when it is empty)."""
        if self.settings.warm_pool and self.pool is None:
            try:
                self.pool = WarmPool(self.backend, self.settings).start()
                metrics.pool_size.set_function(self.pool.idle_count)
            except PierError as exc:  # no engine yet: runs create their sandboxes
                log.warning("warm pool not started: %s", exc)
        return self.pool

    def say_isolation_problem(self, who: str) -> str | None:
        """Log, once at a long-lived process's start, why its sandboxes could reach
        this machine's services (no firewall binary, no right), if they could.
        Asks no engine: start-up never waits on one."""
        try:
            problem = get_backend(self.settings).isolation_problem()
        except PierError as exc:
            problem = str(exc)
        if problem:
            log.warning("%s: %s", who, problem)
        return problem

    @cached_property
    def store(self) -> Store:
        make_private_dir(self.settings.home)
        return Store.open(self.settings.db_url)

    @cached_property
    def run_store(self) -> Store:
        """The store as a run writes to it: calls ride out a database that does
        not answer for up to PIER_DB_RETRY_SEC (pier.db.retry)."""
        return cast(Store, RetryingStore(self.store, self.settings.db_retry_sec))

    @cached_property
    def storage(self) -> RunStorage:
        make_private_dir(self.settings.home)
        if self.settings.storage_url is None:  # a local folder, pier's own
            make_private_dir(self.settings.storage_root)
        return open_storage(self.settings.storage_location)

    @cached_property
    def backend(self) -> SandboxBackend:
        backend = get_backend(self.settings)
        backend.ping()
        return backend


@dataclass(frozen=True)
class RunRequest:
    collection: str
    task_name: str
    task: Task
    run_params: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    resolve_file: FileResolver | None = None
    trajectory_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    source_dir: Path | None = None  # local check sources allowed, relative to here
    # Variables of env that hold a key the server holds for its users (trial keys).
    operator_keys: frozenset[str] = frozenset()

    def inputs(self) -> RunInputs:
        return RunInputs(
            self.trajectory_id,
            self.collection,
            self.task_name,
            self.env,
            self.resolve_file,
            source_dir=self.source_dir,
            operator_keys=self.operator_keys,
        )


def preflight(request: RunRequest, settings: Settings) -> RunPlan:
    """Everything prepare checks, without side effects: raises InputError on bad input
    so callers can refuse a run before accepting it."""
    check_collection_name(request.collection)
    check_name("task", request.task_name)
    _, plan, _ = plan_run(request.task, request.run_params, request.inputs(), settings)
    return plan


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
    else:
        backend = services.backend

    def emit(stage: str, line: str) -> None:
        store.append_event(record.trajectory_id, line, stage)
        if on_log is not None:
            _observe(on_log, stage, line)

    sink: LogSink = emit
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
        save_record=store.save_run,
        redactor=Redactor(request.env.values()),
        on_step=(lambda step: _observe(on_step, step)) if on_step else None,
        storage=services.storage,
        pool=services.pool,
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
