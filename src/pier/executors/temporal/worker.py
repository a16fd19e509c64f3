"""`pier worker`: polls Temporal and runs the lifecycle on this host's sandbox
backend (the workflow is in workflow.py).

A worker listens on three task queues: the shared one (`claim`: a run waits
there until a worker has a free slot; the workflows of runs `pier run
--remote` sent, and every workflow task's steps workflow), its own queue,
named after its identity, where the stages that touch its sandboxes run, and
the steps queue, where any workflow task's steps wait for any worker
(steps.py). The workflows of the runbook runs a server accepted are
decided on the servers' own queue (`decision_queue`), never here: a worker
frozen with its long-polls open would hold the workflow task that reacts to
its silence until that task timed out. A run's
context (its sandbox, plan, agent) lives in this process between `begin` and
`conclude`. The control queue (a lost worker's run failed, a run cancelled
before it started, webhooks) is the servers' alone: a worker frozen with its
long-polls open would otherwise be handed the decision that it is lost. A
run's webhook is the workflow's to deliver (`pier.webhook`, on the control
queue, retried by Temporal): finishing a run here sends none.

A worker that comes back after Temporal gave up on it (frozen, or cut off,
past the heartbeat timeout) finds its activities cancelled as timed out: it
stops those attempts without writing to their runs (they may run again
elsewhere), deletes their sandboxes, frees their slots and takes new work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from pier.executors.base import Job
from pier.executors.ports import EventSink, LifecycleHooks, RunPorts
from pier.executors.spec import RunSpec
from pier.executors.temporal.client import TemporalUnavailable, connect, control_queue, steps_queue
from pier.executors.temporal.step_activities import StepActivities
from pier.executors.temporal.steps import StepsWorkflow
from pier.executors.temporal.workflow import WHOLE_RUN, WORKER_LOST, WORKER_LOST_RUNNING, RunWorkflow
from pier.lifecycle import runner
from pier.lifecycle.background import PeriodicSweeper
from pier.lifecycle.context import RunContext
from pier.lifecycle.outcomes import drain_expired, end_record, interrupted
from pier.lifecycle.start import Services
from pier.policies.webhooks import Delivery, enqueue
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
WORKFLOWS = [RunWorkflow, StepsWorkflow]  # a runbook run's, a workflow task's
# Claims a worker takes beyond its run slots: the next run's claim and the
# workflow's round trips to its `begin` overlap the runs in progress, so a
# slot that frees takes the next run at once (the run waits in `begin`).
PREFETCH = 1


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


def _agent_started(record: Trajectory) -> bool:
    """Whether the run's agent began (its work would be lost by a restart);
    a multi-step workflow goes on from its record elsewhere, as when its
    worker is lost."""
    if record.is_workflow:
        return False
    return any(s.name == "run_agent" and s.started is not None for s in record.outputs.stages)


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _fresh(record: Trajectory) -> Trajectory:
    """A run that starts again: its stages as if it had never started."""
    record.status, record.error, record.failed_stage, record.started = RunStatus.pending, None, None, None
    record.outcome = None
    record.outputs.stages = [StageRecord(name=name) for name in STAGES]
    return record


class FleetActivities:
    def __init__(self, hooks: LifecycleHooks, identity: str, queue: str, settings: Settings):
        self.hooks = hooks
        self.store = hooks.store
        self.identity = identity
        self.queue = queue
        self.settings = settings
        self.stopping = False
        self.draining = False  # SIGTERM: runs in flight finish, runs not started go back to the fleet
        self._slots = settings.worker_slots
        self._held: dict[str, asyncio.TimerHandle | None] = {}  # claimed, up to slots + PREFETCH
        self._active: set[str] = set()  # begun: at most slots
        self._waiters: set[asyncio.Future[None]] = set()  # claims and begins waiting for a slot
        self._runs: dict[str, tuple[Job, RunContext]] = {}
        self._pool = ThreadPoolExecutor(max_workers=2 * self._slots + 4, thread_name_prefix="pier-worker")

    def held(self) -> list[str]:
        return list(self._held)

    # the shared queue

    @activity.defn(name="pier.claim")
    async def claim(self, trajectory_id: str) -> dict[str, str]:
        """Take the run once this worker holds fewer than slots + PREFETCH
        claims; answer with this worker's queue, and that it runs the whole
        lifecycle in one activity (`run`). The claim is kept for `run` (or
        `begin`: either waits for a run slot), and freed if it never comes."""
        await self._wait_until(
            lambda: self.draining or trajectory_id in self._held or len(self._held) < self._slots + PREFETCH
        )
        if self.draining:  # retried by the workflow: another worker claims it
            raise ApplicationError(f"worker {self.identity} is shutting down: it claims no run")
        expiry = 2 * self.settings.schedule_to_start_sec + 5
        self._held[trajectory_id] = asyncio.get_running_loop().call_later(expiry, self._free, trajectory_id)
        return {"queue": self.queue, "worker": self.identity, "stage": WHOLE_RUN}

    # this worker's own queue: the stages that touch its sandboxes

    @activity.defn(name=WHOLE_RUN)
    async def run(self, raw: dict[str, Any]) -> str:
        """The whole lifecycle: begin, then conclude, in one activity (no
        workflow task and no dispatch between them on the slot's time). The
        worker going away once the agent started says so (WORKER_LOST_RUNNING):
        the run is not started again."""
        began = await self.begin(raw)
        if began != "started":
            return began
        try:
            return await self.conclude(raw["trajectory_id"])
        except ApplicationError as exc:
            if exc.type == WORKER_LOST:
                raise ApplicationError(exc.message, type=WORKER_LOST_RUNNING, non_retryable=True) from None
            raise

    @activity.defn(name="pier.begin")
    async def begin(self, raw: dict[str, Any]) -> str:
        spec = RunSpec.model_validate(raw)
        tid = spec.trajectory_id
        self._keep(tid)
        try:
            # a prefetched claim's run waits here, already on this worker, for a run slot
            await self._wait_until(
                lambda: self.draining or tid in self._active or len(self._active) < self._slots
            )
            if self.draining and tid not in self._active:  # handed back, not failed: another worker runs it
                self._free(tid)
                log.info("run %s goes back to the fleet: this worker is shutting down", tid)
                raise ApplicationError(f"worker {self.identity} is shutting down", type=WORKER_LOST)
        except asyncio.CancelledError:
            # the run never started here: cancelled (the workflow records it),
            # this worker declared lost (the workflow starts it again), or stopping
            self._free(tid)
            if self.stopping:
                raise ApplicationError(f"worker {self.identity} stopped", type=WORKER_LOST) from None
            raise
        self._active.add(tid)
        job = Job(tid, spec.open(self.hooks.vault))
        record = await self._thread(lambda: self.store.get_run(tid))
        if record.status.terminal:  # ended elsewhere meanwhile (cancelled from the API)
            self._forget(tid)
            return record.status.value
        if record.status == RunStatus.running:  # a lost worker had started it
            await self._thread(lambda: self.store.save_run(_fresh(record)))
        try:
            ctx = await self._thread(lambda: self.hooks.context(job))
        except Exception as exc:  # e.g. a secret the runbook requires was deleted meanwhile
            error = exc
            await self._thread(lambda: self.hooks.ended(job, None, error))
            self._forget(tid)
            return RunStatus.failed.value
        self._runs[tid] = (job, ctx)
        ctx.log(f"worker {self.identity} runs it", "prepare")
        await self._supervise(ctx, lambda: runner.begin(ctx), lambda: self._end(job, ctx))
        if ctx.cancel.is_set():
            ended = await self._thread(lambda: self._end(job, ctx))
            self._forget(tid)  # its sandbox is gone: no release comes
            return ended.status.value
        return "started"

    @activity.defn(name="pier.conclude")
    async def conclude(self, trajectory_id: str) -> str:
        held = self._runs.get(trajectory_id)
        if held is None:
            raise ApplicationError(
                f"worker {self.identity} does not hold run {trajectory_id} (it restarted?)",
                type=WORKER_LOST,
                non_retryable=True,
            )
        job, ctx = held
        record = await self._supervise(ctx, lambda: self._end(job, ctx), None)
        # the run has ended and its sandbox is gone: its slot takes the next
        # run now, and no release comes (the workflow skips it)
        self._forget(trajectory_id)
        return record.status.value

    @activity.defn(name="pier.release")
    async def release(self, trajectory_id: str) -> None:
        """Delete the run's sandbox (a no-op once the run deleted it) and free its slot."""
        held = self._runs.pop(trajectory_id, None)
        try:
            if held is not None and held[1].sandbox is not None:
                # heartbeating: a frozen worker handed its release holds the workflow a heartbeat timeout, no more
                future = asyncio.get_running_loop().run_in_executor(self._pool, held[1].sandbox.delete)
                while not future.done():
                    activity.heartbeat()
                    await asyncio.wait({future}, timeout=HEARTBEAT_EVERY_SEC)
                future.result()
        finally:
            self._free(trajectory_id)

    # the end of the worker

    async def drain(
        self, timeout_sec: float, force: asyncio.Event, signal_name: str = "SIGTERM"
    ) -> list[str]:
        """Wait, up to `timeout_sec` or until `force` is set (a second
        signal), for the runs begun here to end; runs claimed but not begun go
        back to the fleet. Then the runs whose agent had started end failed,
        saying the shutdown did not wait for them (`_stop_in_flight`); those
        whose agent had not go back to the fleet when the worker stops. The
        ids still running then."""
        self.draining = True
        self._wake()
        log.info("pier worker %s: draining: no new claims; waiting up to %gs (PIER_DRAIN_TIMEOUT_SEC) for %d "
                 "run(s) in flight", self.identity, timeout_sec, len(self._active))  # fmt: skip
        deadline = asyncio.get_running_loop().time() + timeout_sec
        while self._active and not force.is_set():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(force.wait(), min(left, 0.5))
        if self._active:
            log.warning("pier worker %s: %d run(s) did not end within the drain and stop now: %s",
                        self.identity, len(self._active), ", ".join(sorted(self._active)))  # fmt: skip
            await self._stop_in_flight(
                drain_expired(signal_name, timeout_sec, f"worker {self.identity}"), force
            )
        return sorted(self._active)

    async def _stop_in_flight(self, reason: str, force: asyncio.Event) -> None:
        """End the runs whose agent started here as the server ends its own at
        a drain's end: recorded failed with `reason` (naming the shutdown),
        their sandboxes deleted, their lifecycles let finish so their
        activities return and their workflows end. A run whose agent had not
        started (or a multi-step workflow, which goes on from its record) is
        left to the worker's stop, which hands it back to the fleet: it
        starts again on another worker, not failed."""
        ending: list[str] = []
        for tid in sorted(self._active):
            held = self._runs.get(tid)
            if held is None or not _agent_started(held[1].record):
                continue
            ctx = held[1]
            ending.append(tid)

            def interrupt(tid: str = tid, ctx: RunContext = ctx) -> None:
                try:
                    self.store.save_run(interrupted(self.store.get_run(tid), reason))
                    self.store.append_event(tid, reason, "save")
                except Exception:  # the lifecycle still ends it with the reason (stopped_as)
                    log.exception("could not record that run %s was stopped by the shutdown", tid)
                ctx.stopped_as = reason  # its trace and metrics end as its record: failed, saying why
                runner.cancel(ctx)
                self.hooks.ports.publish(tid)

            await self._thread(interrupt)
        # their lifecycles return once the sandbox is gone: bounded by a sandbox's deletion
        deadline = asyncio.get_running_loop().time() + self.settings.cleanup_timeout_sec + 30
        while any(t in self._active for t in ending) and not force.is_set():
            if asyncio.get_running_loop().time() >= deadline:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(force.wait(), 0.2)

    # helpers

    def _end(self, job: Job, ctx: RunContext) -> Trajectory:
        """Run the rest of the lifecycle; finish up (webhook, followers) unless
        another process ended the run first (its status stays, and so does its
        webhook)."""
        record = runner.conclude(ctx)
        stored = self.store.get_run(job.trajectory_id)
        if stored.status == record.status:
            self.hooks.ended(job, record, None)
        return stored

    async def _supervise(
        self, ctx: RunContext, work: Callable[[], T], on_cancel: Callable[[], Any] | None
    ) -> T:
        """Run `work` on a thread, heartbeating; a cancellation (the workflow
        was cancelled) deletes the sandbox at once, and `on_cancel` then ends
        the run. A worker going away leaves the run to the workflow instead."""
        future = asyncio.get_running_loop().run_in_executor(self._pool, work)
        try:
            while not future.done():
                activity.heartbeat()
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
            if declared_lost:
                # a sandbox whose create was under way at the cancel is made
                # after it: no release of this run comes here now, so it goes
                await self._thread(lambda: runner.cancel(ctx))
            if self.stopping:
                raise ApplicationError(f"worker {self.identity} stopped", type=WORKER_LOST) from None
            if declared_lost:
                self._forget(ctx.record.trajectory_id)
                log.warning("run %s: this worker was declared lost (it did not answer for %gs); its "
                            "attempt is stopped, its sandbox deleted and its slot free",
                            ctx.record.trajectory_id, self.settings.heartbeat_timeout_sec)  # fmt: skip
                raise ApplicationError(
                    f"worker {self.identity} was declared lost", type=WORKER_LOST
                ) from None
            if on_cancel is not None:
                await self._thread(on_cancel)
            raise
        return future.result()

    def _forget(self, trajectory_id: str) -> None:
        """A run this worker no longer holds (the workflow moved on without it)."""
        self._runs.pop(trajectory_id, None)
        self._free(trajectory_id)

    def _keep(self, trajectory_id: str) -> None:
        timer = self._held.get(trajectory_id)
        if timer is not None:
            timer.cancel()
        self._held[trajectory_id] = None

    async def _wait_until(self, ready: Callable[[], bool]) -> None:
        """Heartbeating until `ready()` (a slot or a claim came free). Each
        wait has a future of its own that `_free` resolves: a slot freed
        between the check and the wait wakes it at once."""
        while not ready():
            activity.heartbeat()
            woken = asyncio.get_running_loop().create_future()
            self._waiters.add(woken)
            try:
                await asyncio.wait({woken}, timeout=HEARTBEAT_EVERY_SEC)
            finally:
                self._waiters.discard(woken)

    def _free(self, trajectory_id: str) -> None:
        self._active.discard(trajectory_id)
        timer = self._held.pop(trajectory_id, None)
        if timer is not None:
            timer.cancel()
        self._wake()

    def _wake(self) -> None:
        for woken in self._waiters:
            if not woken.done():
                woken.set_result(None)

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
        """The run's worker stopped answering during `conclude`: "restart"
        when its agent had not started after all, else the run fails."""
        return await self._thread(lambda: self._fail(arg["trajectory_id"], arg["worker"]))

    @activity.defn(name="pier.restarting")
    async def restarting(self, arg: dict[str, str]) -> None:
        tid = arg["trajectory_id"]
        await self._thread(lambda: self.store.append_event(tid, restart_message(arg["worker"]), "prepare"))
        self.hooks.ports.publish(tid)

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
        if record.is_workflow:  # it goes on from its record: finished steps and children are kept
            return "restart"
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


# A workflow's next task waits this long for the server that holds it cached
# (its sticky queue) before any server takes it: a replica that died costs no more.
STICKY_WAIT_SEC = 2


def workflow_worker(client: Client, settings: Settings, identity: str, queue: str) -> Worker:
    """A server's: runs workflows only (they decide, they execute nothing), so
    a run whose worker is lost, or cancelled while no worker is up, still ends."""
    return Worker(client, task_queue=queue, workflows=WORKFLOWS, workflow_runner=RUNNER, identity=identity,
                  sticky_queue_schedule_to_start_timeout=timedelta(seconds=STICKY_WAIT_SEC))  # fmt: skip


async def serve_worker(
    settings: Settings,
    publish: EventSink,
    stop: asyncio.Event,
    force: asyncio.Event | None = None,
    signal_name: Callable[[], str] = lambda: "SIGTERM",
) -> None:
    """Poll Temporal until `stop` is set, then drain: stop claiming, let the
    runs in flight end (PIER_DRAIN_TIMEOUT_SEC, or until `force` is set), end
    those whose agent still runs naming the shutdown (`signal_name()`), hand
    back those not started, and stop."""
    force = force or asyncio.Event()
    services = Services(settings)
    services.store  # noqa: B018 - fail now when the database does not answer
    services.backend  # noqa: B018 - and when the sandbox backend does not
    # no webhook sender: the workflow delivers webhooks (pier.webhook)
    hooks = LifecycleHooks(RunPorts(services, load_vault(settings), publish, None))
    identity = settings.worker_identity or default_identity()
    queue = f"{settings.temporal_task_queue}-{identity}-{uuid.uuid4().hex[:8]}"
    client = await _connect_until(settings, stop)
    if client is None:
        return
    await _warn_same_identity(client, settings, identity)
    acts = FleetActivities(hooks, identity, queue, settings)
    beat = timedelta(seconds=HEARTBEAT_EVERY_SEC)  # heartbeats (and so cancels) go out this often
    workers = [
        Worker(client, task_queue=settings.temporal_task_queue, workflows=WORKFLOWS,
               workflow_runner=RUNNER, activities=[acts.claim], max_concurrent_activities=1,
               identity=identity, max_heartbeat_throttle_interval=beat, default_heartbeat_throttle_interval=beat),
        Worker(client, task_queue=queue, activities=[acts.run, acts.begin, acts.conclude, acts.release],
               max_concurrent_activities=3 * settings.worker_slots,
               identity=identity, max_heartbeat_throttle_interval=beat, default_heartbeat_throttle_interval=beat),
    ]  # fmt: skip
    # a workflow task's steps, whoever's run they are: in flight at a stop, they
    # have the drain's time to finish, then go back to be tried elsewhere
    step_acts = StepActivities(hooks, settings, identity)
    steps = Worker(client, task_queue=steps_queue(settings), activities=step_acts.activities(),
                   max_concurrent_activities=settings.worker_steps, identity=identity,
                   graceful_shutdown_timeout=timedelta(seconds=settings.drain_timeout_sec),
                   max_heartbeat_throttle_interval=beat, default_heartbeat_throttle_interval=beat)  # fmt: skip
    sweeper = PeriodicSweeper(lambda: services.backend, services.store, settings)  # this host's sandboxes
    sweeper.start()
    metrics.watch_queue(lambda: 0, lambda: len(acts.held()))  # a worker queues nothing: Temporal does
    log.info("pier worker %s: %d slot(s), queue %s", identity, settings.worker_slots, queue)
    try:
        async with workers[1]:  # this worker's own queue: its runs' stages, served to the end
            # the steps queue (any workflow task's steps), then the shared queue
            # (claims and workflow tasks), stopped in the other order
            async with steps, workers[0]:
                await stop.wait()
                acts.draining = True
                acts._wake()  # claims waiting here for a slot go back to the fleet now
                step_acts.stopping = True
            await acts.drain(settings.drain_timeout_sec, force, signal_name())
            acts.stopping = True
    finally:
        sweeper.stop()


SAME_IDENTITY_WINDOW_SEC = 70  # a live worker polls the shared queue at least once a minute


async def _warn_same_identity(client: Client, settings: Settings, identity: str) -> None:
    """Warn when a worker with this identity polls the fleet's queue already:
    two workers with one `--identity` are told apart by nothing in the runs'
    logs, the metrics or Temporal's history."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    try:
        found = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=settings.temporal_namespace,
                task_queue=TaskQueue(name=settings.temporal_task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            ),
            timeout=timedelta(seconds=10),
        )
    except Exception as exc:  # a courtesy: never a reason not to start
        log.debug("could not list the queue's pollers: %s", exc)
        return
    now = datetime.now(UTC)
    for poller in found.pollers:
        if poller.identity != identity:
            continue
        seen = poller.last_access_time.ToDatetime(tzinfo=UTC)
        if (now - seen).total_seconds() < SAME_IDENTITY_WINDOW_SEC:
            log.warning(
                "another worker with identity %s polled the fleet's queue %s %.0fs ago: unless that was this "
                "worker before a restart, two workers share one --identity and nothing tells their runs "
                "apart; give each its own (the default is host-pid)",
                identity, settings.temporal_task_queue, (now - seen).total_seconds(),
            )  # fmt: skip
            return


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
        stop, force = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()
        first: list[str] = []  # the signal that began the drain, for the reason of a run it ends

        def signalled(sig: signal.Signals) -> None:  # the first drains, a second stops at once
            if not stop.is_set():
                first.append(sig.name)
            (force if stop.is_set() else stop).set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, signalled, sig)
        await serve_worker(settings, publish, stop, force, lambda: first[0] if first else "SIGTERM")

    try:
        asyncio.run(main())
    finally:
        tracing.shutdown()
