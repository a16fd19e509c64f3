"""`pier worker`: polls Temporal and runs the lifecycle on this host's sandbox
backend (the workflow is in temporal_workflow.py).

A worker polls the shared task queue for workflows and, while it has a run
slot free, for `execute`: a run's whole lifecycle, on this host, in one
activity that heartbeats with the worker's identity. The control queue (a
lost worker's run failed, a run cancelled before it started, webhooks) is the
servers' alone: a worker frozen with its long-polls open would otherwise be
handed the decision that it is lost. A run's webhook is the workflow's to
deliver (`pier.webhook`, on the control queue, retried by Temporal):
finishing a run here sends none.

Before the agent starts, once the record says it is starting, the worker
confirms with Temporal (a heartbeat it answers) that its attempt is still the
run's: a worker frozen or cut off past the heartbeat timeout may have been
declared lost, and the run started again elsewhere, so that attempt must not
start an agent. A worker that comes back after Temporal gave up on it finds
its activities cancelled as timed out: it stops those attempts without
writing to their runs, deletes their sandboxes, frees their slots and takes
new work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import activity
from temporalio.client import AsyncActivityCancelledError, Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from pier.executors.base import Job
from pier.executors.ports import EventSink, LifecycleHooks, RunPorts
from pier.executors.spec import RunSpec
from pier.executors.temporal_client import TemporalUnavailable, connect, control_queue
from pier.executors.temporal_workflow import WORKER_LOST, RunWorkflow
from pier.lifecycle import runner
from pier.lifecycle.background import PeriodicSweeper
from pier.lifecycle.context import RunContext
from pier.lifecycle.outcomes import end_record
from pier.lifecycle.service import Services
from pier.lifecycle.webhooks import Delivery, enqueue
from pier.record import STAGES, RunStatus, StageRecord, StageStatus, Trajectory
from pier.settings import Settings
from pier.telemetry import metrics, tracing
from pier.vault import load_vault

log = logging.getLogger(__name__)
T = TypeVar("T")

HEARTBEAT_EVERY_SEC = 1.0
# while Temporal does not answer at start-up: the first wait, doubling up to the last
CONNECT_FIRST_WAIT_SEC = 0.5
CONNECT_MAX_WAIT_SEC = 5.0
# The workflow's module imports only temporalio; pier (already loaded, with its
# database models) is passed through rather than re-imported in the sandbox.
RUNNER = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("pier"))


def lost_message(worker: str, heartbeat_sec: float, stored: list[str] | None = None) -> str:
    """Why a run lost with its worker failed, and what of it is stored (the
    worker may have been lost while saving: those files are the run's)."""
    lost = f"worker {worker} was lost while the run was running (no heartbeat for {heartbeat_sec:g}s)"
    if not stored:
        return f"{lost}: its sandbox and the agent's work went with it; run it again"
    shown = ", ".join(stored[:10]) + (f" and {len(stored) - 10} more" if len(stored) > 10 else "")
    return (
        f"{lost}: its sandbox went with it; stored before the loss, and kept: {shown} "
        "(the rest of the agent's work is gone); run it again"
    )


def restart_message(worker: str) -> str:
    return f"worker {worker} was lost before the agent started: the run starts again on another worker"


def _declared_lost() -> bool:
    """Whether the running activity was cancelled because Temporal gave up on
    it (its heartbeat or start-to-close timed out: this worker was frozen, or
    cut off, for longer than that) rather than because the run was cancelled."""
    details = activity.cancellation_details()
    return details is not None and (details.timed_out or details.not_found) and not details.cancel_requested


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _fresh(record: Trajectory) -> Trajectory:
    """A run that starts again: its stages as if it had never started."""
    record.status, record.error, record.failed_stage, record.started = RunStatus.pending, None, None, None
    record.outputs.stages = [StageRecord(name=name) for name in STAGES]
    return record


class FleetActivities:
    def __init__(self, hooks: LifecycleHooks, identity: str, client: Client, settings: Settings):
        self.hooks = hooks
        self.store = hooks.store
        self.identity = identity
        self.client = client
        self.settings = settings
        self.stopping = False
        self._runs: dict[str, tuple[Job, RunContext]] = {}
        slots = settings.worker_slots
        self._pool = ThreadPoolExecutor(max_workers=2 * slots + 4, thread_name_prefix="pier-worker")

    def held(self) -> list[str]:
        return list(self._runs)

    @activity.defn(name="pier.execute")
    async def execute(self, raw: dict[str, Any]) -> str:
        """The run, start to end, on this host; its status. Temporal hands it
        over only while this worker has a slot free (the worker's activity
        slots are its run slots)."""
        activity.heartbeat(self.identity)  # who holds the run, should this worker be lost
        spec = RunSpec.model_validate(raw)
        tid = spec.trajectory_id
        job = Job(tid, spec.open(self.hooks.vault))
        record = await self._thread(lambda: self.store.get_run(tid))
        if record.status.terminal:  # ended elsewhere meanwhile (cancelled from the API)
            return record.status.value
        if record.status == RunStatus.running:  # a lost worker had started it
            await self._thread(lambda: self.store.save_run(_fresh(record)))
        try:
            ctx = await self._thread(lambda: self.hooks.context(job))
        except Exception as exc:  # e.g. a secret the runbook requires was deleted meanwhile
            error = exc
            await self._thread(lambda: self.hooks.ended(job, None, error))
            return RunStatus.failed.value
        self._fence(ctx, activity.info().task_token, asyncio.get_running_loop())
        self._runs[tid] = (job, ctx)
        try:
            ctx.log(f"worker {self.identity} runs it", "prepare")
            return (await self._supervise(ctx, lambda: self._whole(job, ctx))).status.value
        finally:
            self._runs.pop(tid, None)

    # helpers

    def _whole(self, job: Job, ctx: RunContext) -> Trajectory:
        runner.begin(ctx)
        return self._end(job, ctx)

    def _fence(self, ctx: RunContext, token: bytes, loop: asyncio.AbstractEventLoop) -> None:
        """Once the record says the agent is starting (a lost worker's run then
        fails rather than restarts), confirm that this attempt is still the
        run's before the agent starts; an attempt Temporal gave up on (its run
        may run again elsewhere) writes nothing more and deletes its sandbox,
        so its agent never runs."""
        observe = ctx.on_step

        def on_step(step: StageRecord) -> None:
            if observe is not None:
                observe(step)
            if step.name != "run_agent" or step.status != StageStatus.running:
                return
            held = asyncio.run_coroutine_threadsafe(self._still_held(token), loop).result()
            if held == "gone":
                log.warning("run %s: this attempt was given up on before its agent started (this worker was "
                            "declared lost): the agent is not started", ctx.record.trajectory_id)  # fmt: skip
                ctx.save_record = lambda _record: None
                ctx.emit = lambda _stage, _line: None
            if held != "held":
                runner.cancel(ctx)  # the sandbox goes: the agent's command cannot start

        ctx.on_step = on_step

    async def _still_held(self, token: bytes) -> str:
        """ "held" once Temporal took a heartbeat of this attempt, "cancelled"
        when the run is being cancelled, "gone" when Temporal no longer knows
        the attempt; tried again while Temporal does not answer."""
        wait = CONNECT_FIRST_WAIT_SEC
        while True:
            try:
                await self.client.get_async_activity_handle(task_token=token).heartbeat(self.identity)
                return "held"
            except AsyncActivityCancelledError:
                return "cancelled"
            except RPCError as exc:
                if exc.status == RPCStatusCode.NOT_FOUND:
                    return "gone"
                log.warning(
                    "could not confirm a run's attempt with Temporal (%s); trying again in %gs", exc, wait
                )
            await asyncio.sleep(wait)
            wait = min(2 * wait, CONNECT_MAX_WAIT_SEC)

    def _end(self, job: Job, ctx: RunContext) -> Trajectory:
        """Run the rest of the lifecycle; finish up (webhook, followers) unless
        another process ended the run first (its status stays, and so does its
        webhook)."""
        record = runner.conclude(ctx)
        stored = self.store.get_run(job.trajectory_id)
        if stored.status == record.status:
            self.hooks.ended(job, record, None)
        return stored

    async def _supervise(self, ctx: RunContext, work: Callable[[], T]) -> T:
        """Run `work` on a thread, heartbeating; a cancellation (the workflow
        was cancelled) deletes the sandbox at once, and `work` ends the run
        cancelled. A worker going away leaves the run to the workflow instead."""
        future = asyncio.get_running_loop().run_in_executor(self._pool, work)
        try:
            while not future.done():
                activity.heartbeat(self.identity)
                await asyncio.wait({future}, timeout=HEARTBEAT_EVERY_SEC)
        except asyncio.CancelledError:
            declared_lost = _declared_lost()
            if self.stopping or declared_lost:
                # what happens next is the workflow's to say (the run may
                # already run again elsewhere): this attempt writes nothing more
                ctx.save_record = lambda _record: None
                ctx.emit = lambda _stage, _line: None
            runner.cancel(ctx)
            await asyncio.wait({future})
            if self.stopping:
                raise ApplicationError(
                    f"worker {self.identity} stopped", self.identity, type=WORKER_LOST
                ) from None
            if declared_lost:
                log.warning("run %s: this worker was declared lost (it did not answer for %gs); its "
                            "attempt is stopped, its sandbox deleted and its slot free",
                            ctx.record.trajectory_id, self.settings.heartbeat_timeout_sec)  # fmt: skip
                raise ApplicationError(
                    f"worker {self.identity} was declared lost", self.identity, type=WORKER_LOST
                ) from None
            raise
        return future.result()

    async def _thread(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, work)


class ControlActivities:
    """Record keeping a run's own worker cannot do (it is gone): every `pier
    serve` replica polls the control queue, and no worker does, so the process
    declared lost never decides it, and a loss is recorded with no worker left."""

    def __init__(self, hooks: LifecycleHooks, settings: Settings):
        self.hooks = hooks
        self.store = hooks.store
        self.settings = settings
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pier-control")

    def activities(self) -> list[Callable[..., Any]]:
        return [self.lost, self.restarting, self.cancelled_waiting, self.webhook]

    @activity.defn(name="pier.lost")
    async def lost(self, arg: dict[str, str]) -> str:
        """The run's worker stopped answering (or stopped) while it held the
        run: "restart" when its agent had not started, else the run fails."""
        tid = arg["trajectory_id"]
        return await self._thread(lambda: self._fail(tid, self._worker(tid, arg["worker"])))

    @activity.defn(name="pier.restarting")
    async def restarting(self, arg: dict[str, str]) -> None:
        tid = arg["trajectory_id"]

        def note() -> None:
            self.store.append_event(tid, restart_message(self._worker(tid, arg["worker"])), "prepare")

        await self._thread(note)
        self.hooks.ports.publish(tid)

    def _worker(self, trajectory_id: str, given: str) -> str:
        """The lost worker's identity: as its heartbeats said, else as the
        run's log says (none of its heartbeats reached Temporal)."""
        if given:
            return given
        took = [e.line for e in self.store.events(trajectory_id) if e.line.startswith("worker ")]
        took = [line.split()[1] for line in took if line.endswith(" runs it")]
        return took[-1] if took else "(unknown)"

    @activity.defn(name="pier.cancelled_waiting")
    async def cancelled_waiting(self, raw: dict[str, Any]) -> None:
        spec = RunSpec.model_validate(raw)
        job = Job(spec.trajectory_id, spec.open(self.hooks.vault))

        def record() -> None:
            if not self.store.get_run(job.trajectory_id).status.terminal:
                self.hooks.cancelled_before_start(job)

        await self._thread(record)

    @activity.defn(name="pier.webhook")
    async def webhook(self, arg: dict[str, Any]) -> None:
        """Store the ended run's webhook in the durable queue that every
        `pier serve` delivers from (one delivery mechanism, whatever the
        executor); idempotent, so Temporal's retries never send it twice. The
        secret stays sealed: the history never holds it."""
        tid, url = arg["trajectory_id"], arg["url"]
        record = await self._thread(lambda: self.store.get_run(tid))
        if not record.status.terminal:  # the workflow ended without ending it: nothing to report
            log.warning("run %s has not ended (%s): no webhook sent", tid, record.status.value)
            return
        delivery = Delivery(url, None, record.model_dump_json().encode(), tid, record.collection)
        window = self.hooks.services.settings.webhook_window_sec
        await self._thread(lambda: enqueue(self.store, delivery, arg.get("sealed_secret"), window))

    def _fail(self, trajectory_id: str, worker: str) -> str:
        record = self.store.get_run(trajectory_id)
        if record.status.terminal:
            return record.status.value
        if record.stage("run_agent").status == StageStatus.pending:
            return "restart"
        keys = self._stored(record)
        base = record.storage_path.strip("/") + "/"
        stored = sorted(k.removeprefix(base) for k in keys if k.removeprefix(base) != "run.json")
        message = lost_message(worker, self.settings.heartbeat_timeout_sec, stored)
        # the record lists only what is stored
        kept = [f for f in record.outputs.results_files if f.key in keys]
        record.set_results(kept, [p for p in record.outputs.primary_files if record.result_key(p) in keys])
        stage = next((s.name for s in record.stages if s.status == "running"), "run_agent")
        self.store.append_event(trajectory_id, message, stage)
        if self.store.save_run(end_record(record, RunStatus.failed, message)):
            self.hooks.finished(trajectory_id, None, record)
        return RunStatus.failed.value

    def _stored(self, record: Trajectory) -> set[str]:
        """The keys of the run's files in storage."""
        try:
            return {f.key for f in self.hooks.services.storage.files(record.storage_path)}
        except Exception as exc:  # storage down too: say nothing was kept rather than guess
            log.warning("could not list what run %s stored: %s", record.trajectory_id, exc)
            return set()

    async def _thread(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, work)


def control_worker(client: Client, hooks: LifecycleHooks, settings: Settings, identity: str) -> Worker:
    return Worker(client, task_queue=control_queue(settings), max_concurrent_activities=4,
                  activities=ControlActivities(hooks, settings).activities(), identity=identity)  # fmt: skip


def workflow_worker(client: Client, settings: Settings, identity: str) -> Worker:
    """Runs workflows only (they decide, they execute nothing): a server polls
    with it too, so a run cancelled while no worker is up still ends."""
    return Worker(client, task_queue=settings.temporal_task_queue, workflows=[RunWorkflow],
                  workflow_runner=RUNNER, identity=identity)  # fmt: skip


async def serve_worker(settings: Settings, publish: EventSink, stop: asyncio.Event) -> None:
    """Poll Temporal until `stop` is set."""
    services = Services(settings)
    services.store  # noqa: B018 - fail now when the database does not answer
    services.backend  # noqa: B018 - and when the sandbox backend does not
    # no webhook sender: the workflow delivers webhooks (pier.webhook)
    hooks = LifecycleHooks(RunPorts(services, load_vault(settings), publish, None))
    identity = settings.worker_identity or default_identity()
    client = await _connect_until(settings, stop)
    if client is None:
        return
    acts = FleetActivities(hooks, identity, client, settings)
    beat = timedelta(seconds=HEARTBEAT_EVERY_SEC)  # heartbeats (and so cancels) go out this often
    # its activity slots are its run slots: it polls for a run only while one is free
    worker = Worker(client, task_queue=settings.temporal_task_queue, workflows=[RunWorkflow],
                    workflow_runner=RUNNER, activities=[acts.execute],
                    max_concurrent_activities=settings.worker_slots, identity=identity,
                    max_heartbeat_throttle_interval=beat, default_heartbeat_throttle_interval=beat)  # fmt: skip
    sweeper = PeriodicSweeper(lambda: services.backend, services.store, settings)  # this host's sandboxes
    sweeper.start()
    metrics.watch_queue(lambda: 0, lambda: len(acts.held()))  # a worker queues nothing: Temporal does
    log.info("pier worker %s: %d slot(s)", identity, settings.worker_slots)
    try:
        async with worker:
            await stop.wait()
            acts.stopping = True
    finally:
        sweeper.stop()


async def _connect_until(settings: Settings, stop: asyncio.Event) -> Client | None:
    """Connect to Temporal, trying again with a doubling wait while it does not
    answer (a worker started while Temporal restarts takes runs once it is
    back: start-up never depends on the fleet's state); None when `stop` came
    first."""
    wait = CONNECT_FIRST_WAIT_SEC
    while True:
        try:
            return await connect(settings)
        except TemporalUnavailable as exc:
            log.warning("%s; trying again in %gs", exc, wait)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait)
            return None
        wait = min(2 * wait, CONNECT_MAX_WAIT_SEC)


def run_worker(settings: Settings, publish: EventSink) -> None:
    """Run until SIGTERM or SIGINT."""

    metrics.allow_collection_labels(settings.metrics_collections)
    tracing.configure("pier-worker")
    if settings.metrics_address:
        metrics.serve(settings.metrics_address)
        log.info("pier worker: metrics on http://%s/metrics", settings.metrics_address)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve_worker(settings, publish, stop)

    try:
        asyncio.run(main())
    finally:
        tracing.shutdown()
