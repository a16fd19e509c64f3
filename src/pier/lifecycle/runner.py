"""Runs the stages in order and always reaches delete, whatever failed."""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
import traceback
from collections.abc import Callable

from pier.db.retry import outage_message
from pier.errors import PierError, StageError
from pier.lifecycle import stages
from pier.lifecycle.context import RunContext, scratch_dir
from pier.lifecycle.interrupts import deferred_signals, interruption_reason
from pier.lifecycle.orphans import remove_sandboxes
from pier.lifecycle.outcomes import BEFORE_AGENT as NOT_STARTED
from pier.lifecycle.outcomes import Outcome, classify, end_record, finished_outcome
from pier.lifecycle.save import publish_retried
from pier.lifecycle.sessions import keep
from pier.record import RunStatus, StageRecord, StageStatus, Trajectory, utcnow
from pier.sandbox.owner import owner_label
from pier.sandbox.runlog import to_run_log
from pier.telemetry import logs, metrics, tracing

log = logging.getLogger(__name__)

Stage = Callable[[RunContext], None]
STAGES: tuple[tuple[str, Stage], ...] = (
    ("prepare", stages.prepare),
    ("create", stages.create),
    ("setup", stages.setup),
    ("run_agent", stages.run_agent),
    ("cleanup_credentials", stages.cleanup_credentials),
    ("collect", stages.collect),
    ("check", stages.check),
    ("save", stages.save),
)
# After a failure these still run (when there is a sandbox): credentials must go,
# and what the agent wrote is worth keeping to see why it failed.
AFTER_FAILURE = frozenset({"cleanup_credentials", "collect", "save"})


def _logged(ctx: RunContext) -> contextlib.AbstractContextManager[None]:
    """Log lines while a run's stages run carry its ids (PIER_LOG_FORMAT=json)."""
    record = ctx.record
    return logs.run_context(record.trajectory_id, record.collection, record.trace_id)


def execute(ctx: RunContext) -> Trajectory:
    """Run every stage; whatever happens, delete the sandbox and the scratch files
    and save how the run ended. An interruption (Interrupted, KeyboardInterrupt)
    cancels the run, saying why, and is raised again once that is done.
    A workflow task's steps run in pier.lifecycle.workflow instead."""
    with _logged(ctx):
        log.info("run %s of %s/%s started", ctx.record.trajectory_id, ctx.record.collection, ctx.record.name)
        try:
            record = _execute(ctx)
        finally:
            ctx.flush_log()  # what was said after the record's last save (a failed write loses it)
        log.info("run %s %s", record.trajectory_id, record.status.value)
        return record


def _execute(ctx: RunContext) -> Trajectory:
    if getattr(ctx.task, "is_workflow", False):  # its steps run in pier.lifecycle.workflow
        from pier.lifecycle.workflow import execute_workflow

        return execute_workflow(ctx)
    record = ctx.record
    record.status = RunStatus.running
    record.started = utcnow()  # saved with the first stage's start, a moment later
    record.owner = owner_label()  # the process that runs it: if it dies, others end the run
    started = time.monotonic()
    _observe_start(record)
    try:
        for name, stage in STAGES:
            _step(ctx, name, stage)
    except BaseException as exc:  # a signal, not a stage's failure (those are recorded by _step)
        _interrupted(ctx, exc)
        with deferred_signals():
            _keep_what_was_made(ctx)
            # Interrupted inside a create call, a sandbox may exist that the
            # context never got (the run's own, or a fresh one for checks).
            remove_sandboxes(lambda: ctx.backend, {record.trajectory_id})
        raise
    finally:
        with deferred_signals():  # a second Ctrl-C must not cut the clean-up short
            stages.close_model_route(ctx)
            _delete_sandbox(ctx)
            stages.close_run_egress(ctx)
            _finish(ctx, time.monotonic() - started)  # publishes what a skipped save left
    return record


# A distributed executor runs a run in two halves, each on the sandbox's host:
# before the agent starts, a lost host only costs a restart elsewhere; after,
# the agent's work is gone with it.
BEFORE_AGENT = STAGES[:3]
FROM_AGENT = STAGES[3:]


def begin(ctx: RunContext) -> None:
    """The first half of execute: the run is running, its sandbox is set up.
    On an unexpected exit the sandbox goes and the run is finished."""
    with _logged(ctx):
        log.info("run %s of %s/%s started", ctx.record.trajectory_id, ctx.record.collection, ctx.record.name)
        _begin(ctx)


def _begin(ctx: RunContext) -> None:
    record = ctx.record
    if getattr(ctx.task, "is_workflow", False):  # no sandbox to set up: conclude runs its steps
        record.status, record.started, record.owner = RunStatus.running, utcnow(), None
        ctx.save_record(record)
        return
    record.status = RunStatus.running
    record.started = utcnow()
    # No process owns a fleet run: its workflow decides what a lost worker means
    # (a restart elsewhere, or a failure naming it), so no pier process on this
    # host may end it because a local pid is gone.
    record.owner = None
    ctx.save_record(record)
    _observe_start(record)
    try:
        for name, stage in BEFORE_AGENT:
            _step(ctx, name, stage)
    except BaseException:
        _clean_up(ctx)
        raise


def conclude(ctx: RunContext) -> Trajectory:
    """The second half of execute, after begin on the same context. A
    workflow's steps all run here, on this worker (one Temporal activity)."""
    with _logged(ctx):
        try:
            record = _conclude(ctx)
        finally:
            ctx.flush_log()
        log.info("run %s %s", record.trajectory_id, record.status.value)
        return record


def _conclude(ctx: RunContext) -> Trajectory:
    if getattr(ctx.task, "is_workflow", False):
        from pier.lifecycle.workflow import execute_workflow

        return execute_workflow(ctx, owned=False)
    try:
        for name, stage in FROM_AGENT:
            _step(ctx, name, stage)
    finally:
        _clean_up(ctx)
    return ctx.record


def _clean_up(ctx: RunContext) -> None:
    """What execute's end does: the sandbox and its routes go, the run is
    finished (and its outputs published), then its scratch files go."""
    stages.close_model_route(ctx)
    _delete_sandbox(ctx)
    stages.close_run_egress(ctx)
    _finish(ctx, _elapsed(ctx))


def _elapsed(ctx: RunContext) -> float:
    started = ctx.record.started
    return 0.0 if started is None else (utcnow() - started).total_seconds()


def cancel(ctx: RunContext) -> None:
    """Stop a run from another thread. Between stages the flag is enough; during
    one (the agent may run for half an hour) deleting the sandbox ends whatever
    runs in it, so the stage fails at once and the runner finishes as cancelled."""
    ctx.cancel.set()
    sandbox = ctx.sandbox
    if sandbox is not None:
        sandbox.delete()
    children = getattr(ctx, "children", None)
    if children is not None:  # a workflow's fan-out: its running children end too
        children.cancel_all()


def _interrupted(ctx: RunContext, exc: BaseException) -> None:
    """The run is cancelled by `exc`: the stage it was in fails saying why."""
    ctx.cancel.set()
    message = f"the run was interrupted: {interruption_reason(exc)}"
    end_record(ctx.record, RunStatus.cancelled, message)
    ctx.log(message)


def _keep_what_was_made(ctx: RunContext) -> None:
    """An interrupted run keeps what its agent had made, as a timed-out one
    does: collect runs once more on the sandbox before it goes (save's
    publishing is the run's end's, in _finish). Nothing to keep when the agent
    never started or the sandbox is gone."""
    record = ctx.record
    agent = record.stage("run_agent")
    if ctx.sandbox is None or agent.started is None:
        return
    step = record.stage("collect")
    step.status, step.started = StageStatus.running, utcnow()
    began = time.monotonic()
    try:
        with to_run_log(lambda line: ctx.log(line, "collect")):
            stages.collect(ctx)
        step.status = StageStatus.completed
        step.detail = "kept what the agent had made when the run was interrupted"
        ctx.log(step.detail, "collect")
    except Exception as exc:  # what could be kept is kept; say why the rest is not
        why = ctx.redactor.text(exc.message if isinstance(exc, StageError) else str(exc))
        kept = bool(record.outputs.results_files)
        step.status = StageStatus.failed if kept else StageStatus.skipped
        step.detail = f"{'not all was kept' if kept else 'nothing was kept'} after the interruption: {why}"
        ctx.log(step.detail, "collect")
    finally:
        step.ended = utcnow()
        step.duration_seconds = round(time.monotonic() - began, 3)


def _step(ctx: RunContext, name: str, stage: Stage) -> None:
    record = ctx.record
    step = record.stage(name)
    if ctx.cancel.is_set():  # its sandbox is gone (cancel deletes it): nothing left to do
        record.fail(name, "the run was cancelled", Outcome.cancelled)
        step.status = StageStatus.skipped
        return
    if record.error is not None and not _after_failure(record, name, ctx):
        step.status = StageStatus.skipped
        return
    ctx.stage = name
    step.status, step.started = StageStatus.running, utcnow()
    _saved(ctx, step)
    began = time.monotonic()
    try:
        with to_run_log(lambda line: ctx.log(line, name)):  # the backend's notes (an engine call tried again)
            stage(ctx)
        step.status = StageStatus.completed
    except Exception as exc:  # every failure is recorded against its stage
        step.status = StageStatus.failed
        message = _message(ctx, name, exc)
        step.detail = message
        record.fail(name, message, Outcome.cancelled if ctx.cancel.is_set() else classify(name, exc))
        ctx.log(f"{name} failed: {message}", name)
    finally:
        step.ended = utcnow()
        step.duration_seconds = round(time.monotonic() - began, 3)
        metrics.stage_duration.labels(name, step.status.value).observe(step.duration_seconds)
        tracing.stage_span(record, step)
        if name == tracing.AGENT_STAGE:
            for call in ctx.tool_calls:
                tracing.tool_span(record.trajectory_id, call, step.ended)
        ctx.flush_log()  # the stage's lines are stored before anyone is told it ended
        _saved(ctx, step, store=False)


def _after_failure(record: Trajectory, name: str, ctx: RunContext) -> bool:
    """Whether stage `name` still runs after the run failed: credentials go and
    what the agent wrote is kept; a run that failed before its agent started
    has nothing to collect, so it ends there (saving only its record)."""
    if name not in AFTER_FAILURE or ctx.sandbox is None:
        return False
    return not (record.failed_stage in NOT_STARTED and name == "collect")


def _saved(ctx: RunContext, step: StageRecord, store: bool = True) -> None:
    """Tell the live view; store the record when a stage starts. A stage's end is
    stored with the next stage's start (a moment later) or the run's finish: one
    record write per stage, not two, each a write transaction every run waits on
    under SQLite."""
    if store:
        ctx.save_record(ctx.record)
    if ctx.on_step is not None:
        ctx.on_step(step)


def _message(ctx: RunContext, stage: str, exc: Exception) -> str:
    if ctx.cancel.is_set():
        return "the run was cancelled"
    if isinstance(exc, StageError):
        return ctx.redactor.text(exc.message)
    if isinstance(exc, PierError):
        return ctx.redactor.text(str(exc))
    outage = outage_message(exc, ctx.settings.db_retry_sec)
    if outage is not None:  # the database's budget ran out: an outage, said as one (no driver's link)
        log.error("stage %s: %s", stage, outage)
        return ctx.redactor.text(outage)
    log.error("unexpected error in stage %s:\n%s", stage, traceback.format_exc())
    return ctx.redactor.text(f"internal error in {stage}: {type(exc).__name__}: {exc}")


def _delete_sandbox(ctx: RunContext) -> None:
    if ctx.sandbox is None:
        return
    if keep(ctx):  # kept after the run (keep_sandbox): the sweep deletes it when it expires
        metrics.sandboxes_live.dec()
        return
    with metrics.sandbox_operation.labels("delete", ctx.backend.runtime or "unknown").time():
        ctx.sandbox.delete()
    metrics.sandboxes_live.dec()
    ctx.log(f"sandbox {ctx.sandbox.id[:12]} deleted", "save")
    if ctx.pool is not None:
        ctx.pool.refill()  # a claimed sandbox is replaced once its run no longer needs the engine


def _finish(ctx: RunContext, elapsed: float) -> None:
    record = ctx.record
    if ctx.cancel.is_set() and ctx.stopped_as:  # the server stopped it: failed, in trace and metrics too
        status = RunStatus.failed
        record.error = ctx.stopped_as
    elif ctx.cancel.is_set():
        status = RunStatus.cancelled
    elif record.error is not None:
        status = RunStatus.failed
    else:
        status = RunStatus.completed
    record.finish(status, utcnow(), round(elapsed, 3))
    record.outcome = finished_outcome(record)
    _observe_end(record, elapsed)
    ctx.log(f"run {record.status.value} in {elapsed:.1f}s", "save")
    try:
        _store_run_json(ctx)
    finally:
        # before the record's save: on a full disk, the scratch folder is the room it needs
        shutil.rmtree(scratch_dir(ctx.settings, record.trajectory_id), ignore_errors=True)
    ctx.save_record(record)


def _store_run_json(ctx: RunContext) -> None:
    """run.json beside the outputs, tried again while storage fails (as save
    is); what a skipped save left in scratch goes with it."""
    record = ctx.record
    try:
        ctx.output_dir.mkdir(parents=True, exist_ok=True)
        (ctx.output_dir / "run.json").write_text(record.model_dump_json(indent=2))
        publish_retried(ctx)
    except Exception as exc:  # the record in the store is what counts; say why the copy is missing
        log.warning("could not store run.json of %s: %s", record.trajectory_id, exc)
        ctx.log(f"run.json could not be stored ({exc}): the run's record in the database is complete", "save")


def _observe_start(record: Trajectory) -> None:
    metrics.runs_started.labels(metrics.collection_label(record.collection)).inc()
    metrics.queue_wait.observe(max((utcnow() - record.created).total_seconds(), 0.0))


def _observe_end(record: Trajectory, elapsed: float) -> None:
    status = record.status.value
    label = metrics.collection_label(record.collection)
    metrics.runs_ended.labels(label, status, record.failed_stage or "", record.outcome or "").inc()
    metrics.run_duration.labels(status).observe(elapsed)
    tracing.run_span(record)
