"""The run workflow: one per run, workflow id = the run's trajectory id.

It imports only temporalio and the standard library: Temporal replays it in a
sandbox. What it decides:

1. `execute` on the shared task queue: the run waits there until a worker
   with a free run slot takes it (a worker polls for one only while it has a
   slot free), and that worker runs the whole lifecycle on its host, the
   sandbox's, heartbeating with its identity. One activity per run: with runs
   queued, a slot that frees takes the next at once, with no workflow round
   trip between them.
2. `webhook`, once the run has ended (cancelled included), when it has a
   webhook_url: an activity on the control queue stores the delivery in the
   durable queue every `pier serve` delivers from (retried by Temporal with
   backoff while the database is away). Its secret stays sealed.

A worker lost (its heartbeat stopped: killed, frozen, cut off) or stopping
while it runs the run: `lost`, on the control queue that only servers poll,
reads the run's record. Its agent had not started: a restart, the run taken
again by a worker (its log says which worker was lost). It had: the agent's
work is gone, and the run fails with a reason that names the worker. The
worker cannot start the agent of an attempt Temporal has given up on: the
record says the agent is starting before the worker confirms, by a heartbeat
Temporal answers, that its attempt is still the run's (see temporal_worker.py).
Cancelling the workflow reaches the running activity through its heartbeat;
the activity deletes the sandbox at once and records the run cancelled (a run
cancelled while it waited in the queue is recorded cancelled by a control
activity).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    TimeoutError,
    TimeoutType,
    is_cancelled_exception,
)
from temporalio.workflow import ActivityCancellationType

WORKFLOW = "pier-run"
ONCE = RetryPolicy(maximum_attempts=1)
RESTART = "restart"
WORKER_LOST = "PierWorkerLost"  # an activity's error type: its worker is going away


def _worker_lost(exc: ActivityError) -> bool:
    """The activity's worker is going away (it stopped the attempt)."""
    cause = exc.cause
    return isinstance(cause, ApplicationError) and cause.type == WORKER_LOST


def _holder(exc: ActivityError) -> str:
    """The identity of the worker that ran the attempt, as its heartbeats
    said (empty when none reached Temporal: the control activity then reads
    it from the run's log)."""
    cause = exc.cause
    details = cause.last_heartbeat_details if isinstance(cause, TimeoutError) else ()
    if not details and isinstance(cause, ApplicationError):
        details = cause.details
    return str(details[0]) if details else ""


def _timeout(exc: ActivityError) -> TimeoutType | None:
    cause = exc.cause
    return cause.type if isinstance(cause, TimeoutError) else None


@workflow.defn(name=WORKFLOW)
class RunWorkflow:
    @workflow.run
    async def run(self, spec: dict[str, Any], config: dict[str, Any]) -> str:
        try:
            outcome = await self._run(spec, config)
        except BaseException as exc:
            if is_cancelled_exception(exc):  # the run was ended cancelled: say so
                await self._webhook(spec, config)
            raise
        await self._webhook(spec, config)
        return outcome

    async def _run(self, spec: dict[str, Any], config: dict[str, Any]) -> str:
        tid = spec["trajectory_id"]
        while True:
            try:
                return await workflow.execute_activity(
                    "pier.execute",
                    spec,
                    task_queue=config["task_queue"],
                    # the wait in the queue has no bound; this is the run's own time on its worker
                    start_to_close_timeout=timedelta(seconds=config["run_timeout_sec"]),
                    heartbeat_timeout=timedelta(seconds=config["heartbeat_timeout_sec"]),
                    retry_policy=ONCE,
                    cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                )
            except ActivityError as exc:
                if is_cancelled_exception(exc):
                    # recorded cancelled unless the activity recorded its end (it had started)
                    await self._control("pier.cancelled_waiting", spec, config)
                    raise
                kind = _timeout(exc)
                if kind is None and not _worker_lost(exc):
                    raise
                worker = _holder(exc)
                lost = {
                    "trajectory_id": tid,
                    "worker": worker,
                    "timeout": kind.name.lower() if kind else "stopped",
                }
                # "restart" when the agent had not started (as the run's record says)
                outcome = await self._control("pier.lost", lost, config)
                if outcome != RESTART:
                    return outcome
                await self._control("pier.restarting", {"trajectory_id": tid, "worker": worker}, config)

    async def _webhook(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        """Queue the ended run's webhook for delivery, retried with a doubling
        wait for webhook_attempts attempts; giving up is logged, the run's
        outcome stays."""
        if not spec.get("webhook_url"):
            return
        arg = {
            "trajectory_id": spec["trajectory_id"],
            "url": spec["webhook_url"],
            "sealed_secret": spec.get("sealed_webhook_secret"),
        }
        retry = RetryPolicy(
            initial_interval=timedelta(seconds=max(config.get("webhook_backoff_sec", 1.0), 0.1)),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=config.get("webhook_max_delay_sec", 300)),
            maximum_attempts=config.get("webhook_attempts", 6),
        )
        try:
            await workflow.execute_activity(
                "pier.webhook",
                arg,
                task_queue=config["control_queue"],
                start_to_close_timeout=timedelta(seconds=config.get("webhook_attempt_sec", 30)),
                retry_policy=retry,
            )
        except ActivityError as exc:
            workflow.logger.warning("run %s: its webhook gave up: %s", spec["trajectory_id"], exc.cause)

    async def _control(self, name: str, arg: Any, config: dict[str, Any]) -> Any:
        """Record-keeping any worker can do (the run's own worker may be gone)."""
        return await workflow.execute_activity(
            name,
            arg,
            task_queue=config["control_queue"],
            # short, and retried: a server frozen with a poll open holds it this long at most
            start_to_close_timeout=timedelta(seconds=config.get("control_attempt_sec", 60)),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
        )
