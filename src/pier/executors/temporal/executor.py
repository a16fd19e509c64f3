"""The Temporal executor (`PIER_EXECUTOR=temporal`): `pier serve` starts one
workflow per run (id = the run's trajectory id) and executes nothing itself;
`pier worker` processes (worker.py) run the lifecycle.

The run crosses to the worker as a RunSpec, secrets sealed with the vault key:
Temporal's history never holds a secret value in clear, and every worker needs
the servers' PIER_SECRET_KEY (it also opens the collections' environment).

Each workflow carries its collection as Temporal's fairness key, which its
activities inherit: where the Temporal server has fairness on
(`matching.enableFairness`, docs/fleet.md), the claims of a queue's backlog
go to workers in turn per collection, not first come first served, so one
collection's backlog does not hold another's next run behind all of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import Priority, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from pier.executors.base import CancelOutcome, Holding, Job
from pier.executors.spec import RunSpec
from pier.executors.temporal.client import (
    TemporalUnavailable,
    connect,
    control_queue,
    decision_queue,
    steps_queue,
)
from pier.executors.temporal.steps import STEPS_WORKFLOW
from pier.executors.temporal.workflow import WORKFLOW
from pier.policies import webhooks
from pier.settings import Settings
from pier.telemetry import tracing

if TYPE_CHECKING:
    from pier.executors.ports import LifecycleHooks
    from pier.lifecycle.context import RunContext

__all__ = ["TemporalExecutor", "TemporalUnavailable", "connect", "control_queue", "workflow_config"]

log = logging.getLogger(__name__)
T = TypeVar("T")
CALL_TIMEOUT_SEC = 30
STORE_WEBHOOK_ATTEMPTS = 20
# a workflow task's step: tried again on another worker when its worker is lost
# or stops mid-step (a step's own failure is no reason: it fails the run)
STEP_ATTEMPTS = 20  # about an hour of doubling waits: a database outage passes


HEALTH_TIMEOUT_SEC = 3.0
CONNECT_FIRST_WAIT_SEC = 1.0  # a server started while Temporal is down tries again after this,
CONNECT_MAX_WAIT_SEC = 30.0  # doubling up to this


FAIRNESS_KEY_BYTES = 64  # Temporal's bound on a fairness key


def fair_share(job: Job) -> Priority:
    """The run's place in Temporal's fair dispatch: its collection's key
    (the default for a job without a collection: first come, first served)."""
    collection = getattr(job.payload, "collection", None)
    if not collection:
        return Priority.default
    key = collection.encode()
    if len(key) > FAIRNESS_KEY_BYTES:  # names are ASCII, but keep within the bound whatever comes
        key = hashlib.sha256(key).hexdigest()[:FAIRNESS_KEY_BYTES].encode()
    return Priority(fairness_key=key.decode())


def workflow_config(settings: Settings) -> dict[str, Any]:
    """What the workflow needs to know of the settings (it cannot read them)."""
    return {
        "task_queue": settings.temporal_task_queue,
        "control_queue": control_queue(settings),
        "steps_queue": steps_queue(settings),  # a workflow task's steps, for any worker
        "step_attempts": STEP_ATTEMPTS,
        "heartbeat_timeout_sec": settings.heartbeat_timeout_sec,
        "schedule_to_start_sec": settings.schedule_to_start_sec,
        # prepare + create (an image build) + setup, or the agent + collect + check
        "run_timeout_sec": settings.create_timeout_sec + settings.max_timeout_sec + 3600,
        "cleanup_timeout_sec": settings.cleanup_timeout_sec + 30,
        # the run's webhook: the activity stores it in the durable queue the
        # servers deliver from (pier.policies.webhooks); Temporal retries the storing
        "webhook_attempts": STORE_WEBHOOK_ATTEMPTS,
        "webhook_backoff_sec": 1.0,
        # a control activity's attempt (a few record writes, riding out a short database outage)
        "control_attempt_sec": 30,
        "webhook_max_delay_sec": webhooks.MAX_DELAY_SEC,
        "webhook_attempt_sec": 30,  # reading the record, storing the delivery
    }


class TemporalExecutor:
    durable = True  # runs are workflows: they outlive this server

    def __init__(self, settings: Settings, hooks: LifecycleHooks):
        self._settings = settings
        self._hooks = hooks
        self._vault = hooks.vault
        self._control: Any = None
        # the queue this process starts workflows on: the one it decides them on
        # when it polls (a server), else the shared queue the workers poll
        self._workflow_queue = settings.temporal_task_queue
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pier-temporal", daemon=True)
        self._client: Client | None = None
        self._stopping = threading.Event()
        self._connecting: threading.Thread | None = None

    def start(self) -> None:
        """Connect and run the control workers; when Temporal does not answer
        yet, go on (the server serves: readiness and POST /run say Temporal is
        down) and keep connecting in the background, the wait doubling from
        1 s to 30 s, until it answers."""
        self._start_loop()
        try:
            self._begin()
        except Exception as exc:
            log.warning("Temporal does not answer yet (%s): serving without it, connecting in the background",
                        exc)  # fmt: skip
            self._connecting = threading.Thread(target=self._keep_connecting, name="pier-temporal-connect",
                                                daemon=True)  # fmt: skip
            self._connecting.start()

    def _begin(self) -> None:
        client = self._call(lambda: connect(self._settings))
        self._client = client
        self._control = self._call(self._start_control)
        log.info("runs go to Temporal at %s, queue %s", self._settings.temporal_address,
                 self._settings.temporal_task_queue)  # fmt: skip

    def _keep_connecting(self) -> None:
        wait = CONNECT_FIRST_WAIT_SEC
        while not self._stopping.wait(wait):
            try:
                self._begin()
            except Exception as exc:
                log.info("Temporal does not answer yet (%s): trying again in %.0fs", exc, wait)
                wait = min(wait * 2, CONNECT_MAX_WAIT_SEC)
                continue
            log.info("connected to Temporal at %s", self._settings.temporal_address)
            return

    def connect(self) -> None:
        """Submit and cancel only: this process polls no queue (`pier run --remote`)."""
        self._start_loop()
        self._client = self._call(lambda: connect(self._settings))

    def _start_loop(self) -> None:
        if not self._thread.is_alive():
            self._thread.start()

    async def _start_control(self) -> Any:
        """This server keeps records and runs workflows too (a run whose worker
        is lost is failed, one cancelled while it waits ends, even when no
        worker is left); it executes no run."""
        from pier.executors.temporal.worker import control_worker, default_identity, workflow_worker

        identity = f"serve-{default_identity()}"
        workers = [
            # the workflow delivers webhooks (pier.webhook): finishing a run here sends none
            control_worker(self._require(), self._hooks.without_webhooks(), self._settings, identity),
            # the runs this server accepts are decided here, on the servers' own queue
            workflow_worker(self._require(), self._settings, identity, decision_queue(self._settings)),
            # and those `pier run --remote` sent (and any started before the decision queue)
            workflow_worker(self._require(), self._settings, identity, self._settings.temporal_task_queue),
        ]
        for worker in workers:
            asyncio.get_running_loop().create_task(worker.run())
        self._workflow_queue = decision_queue(self._settings)
        return workers

    def submit(self, job: Job) -> None:
        """Start the run's workflow (id: its trajectory id, so a second submit of
        one run is a no-op): a runbook run's (workflow.py) or a
        workflow task's (steps.py); TemporalUnavailable when Temporal does not answer
        within PIER_SUBMIT_TIMEOUT_SEC."""
        spec = RunSpec.seal(job.trajectory_id, job.payload, self._vault)

        async def start() -> Any:
            steps = getattr(job.payload.task, "is_workflow", False)
            with tracing.in_run(job.trajectory_id):  # the workflow's spans go in the run's trace
                return await self._require().start_workflow(
                    # a workflow task's steps are activities of a workflow of their own,
                    # decided on the shared queue (workers go on with it while no server is up)
                    STEPS_WORKFLOW if steps else WORKFLOW,
                    args=[spec.model_dump(mode="json"), workflow_config(self._settings)],
                    id=job.trajectory_id,
                    task_queue=self._settings.temporal_task_queue if steps else self._workflow_queue,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    priority=fair_share(job),
                )

        try:
            self._call(start, self._settings.submit_timeout_sec)
        except WorkflowAlreadyStartedError:
            log.info("run %s already has its workflow", job.trajectory_id)
        except RPCError as exc:
            raise self._unavailable(str(exc)) from None

    def holding(self, trajectory_id: str) -> Holding | None:
        return self._call(lambda: self._holding(trajectory_id))

    async def _holding(self, trajectory_id: str) -> Holding | None:
        handle = self._require().get_workflow_handle(trajectory_id)
        try:
            status = (await handle.describe()).status
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        if status in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW):
            return Holding(open=True)
        reason = ""
        try:
            await handle.result(follow_runs=False)
        except WorkflowFailureError as exc:
            reason = _deepest(exc)
        except Exception as exc:  # cancelled, terminated, timed out: the status says it
            reason = str(exc)
        return Holding(open=False, ended_as=status.name.lower() if status else "", reason=reason)

    def ready(self) -> str | None:
        try:
            healthy = self._call(
                lambda: self._require().service_client.check_health(
                    timeout=timedelta(seconds=HEALTH_TIMEOUT_SEC)
                ),
                HEALTH_TIMEOUT_SEC + 1,
            )
        except Exception as exc:
            return str(exc) if isinstance(exc, TemporalUnavailable) else str(self._unavailable(repr(exc)))
        return None if healthy else str(self._unavailable("its health check failed"))

    def cancel(self, trajectory_id: str) -> CancelOutcome | None:
        handle = self._require().get_workflow_handle(trajectory_id)
        try:
            status = self._call(handle.describe).status
            if status != WorkflowExecutionStatus.RUNNING:
                return None
            self._call(handle.cancel)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return "running"

    def pending(self) -> list[str]:
        return []  # this server holds no run: the workflows do

    def running(self) -> list[str]:
        return []

    def stop(self, interrupt: Callable[[RunContext], None] | None = None) -> list[str]:
        """Nothing runs here: the runs go on on the workers."""
        self._stopping.set()
        if self._connecting is not None:
            self._connecting.join(CALL_TIMEOUT_SEC + 1)
        for worker in self._control or []:
            try:
                self._call(worker.shutdown)
            except Exception:  # going anyway: the other processes carry on
                log.exception("a Temporal worker of this server did not stop cleanly")
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
        return []

    def _require(self) -> Client:
        if self._client is None:
            if self._connecting is not None:  # started while Temporal was down
                raise self._unavailable("not connected yet: connecting in the background")
            raise RuntimeError("the Temporal executor is not started")
        return self._client

    def _call(self, make: Callable[[], Coroutine[Any, Any, T]], timeout: float = CALL_TIMEOUT_SEC) -> T:
        async def call() -> T:
            return await make()

        future = asyncio.run_coroutine_threadsafe(call(), self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()  # a call that gave up must not start a workflow later
            raise self._unavailable(f"no answer in {timeout:g}s") from None

    def _unavailable(self, why: str) -> TemporalUnavailable:
        return TemporalUnavailable(
            f"Temporal does not answer at PIER_TEMPORAL_ADDRESS={self._settings.temporal_address} ({why}); "
            "nothing was started: try again once it is back"
        )


def _deepest(exc: BaseException) -> str:
    """The innermost cause's message: what the activity that failed said."""
    while exc.__cause__ is not None or getattr(exc, "cause", None) is not None:
        exc = getattr(exc, "cause", None) or exc.__cause__  # type: ignore[assignment]
    return str(exc)
