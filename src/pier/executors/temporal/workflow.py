"""The run workflow: one per run, workflow id = the run's trajectory id.

It imports only temporalio and the standard library: Temporal replays it in a
sandbox. What it decides:

1. `claim` on the shared task queue: some worker with a free run slot (or
   one claim beyond its slots: that run then waits in `begin` for a slot,
   the round trips to it done while the slots were busy) takes the run and
   answers with its own task queue (worker-specific queues).
2. `run` (the whole lifecycle: prepare to the end) runs on that queue, so
   every stage that touches the sandbox runs on its host; it heartbeats, and
   a short schedule-to-start timeout notices a worker that is gone before it
   takes it. Claims by a worker from before `run` (its claim does not name
   it), and the histories of their workflows, take two activities instead:
   `begin` (prepare, create, setup) and `conclude` (the agent to the end),
   one workflow task and one dispatch apart.
3. `release` (delete the sandbox, free the slot) runs after, even on
   cancellation, unless the stage returned: a stage that returns has let the
   run go itself (one activity and one workflow task fewer per run). Nor is
   it sent to a worker whose stage timed out: that worker is silent (frozen,
   cut off or dead), so its queue would hold the release until a timeout;
   back, it deletes the sandbox of an attempt it was declared lost on
   itself, and its host's sweep removes what a dead one left.
4. `webhook`, once the run has ended (cancelled included), when it has a
   webhook_url: an activity on the control queue stores the delivery in the
   durable queue every `pier serve` delivers from (retried by Temporal with
   backoff while the database is away). Its secret stays sealed.

A worker lost before the agent started (the stage was never taken, or failed
saying its worker stops before the agent started, or its heartbeat stopped
while the run's record says the agent had not started) costs a restart: the
run is claimed again, by another worker. Lost after (its heartbeat stopped
once the agent had started, as the run's record says), the agent's work is
gone: `lost` fails the run with a reason that names the worker. Cancelling the workflow reaches
the running activity through its heartbeat; the activity deletes the sandbox
at once and records the run cancelled (a run cancelled while it waited for a
slot, in claim or in begin, is recorded cancelled by a control activity).
"""

from __future__ import annotations

import asyncio
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
RELEASED_BY_STAGE = "released-by-stage"  # begin and conclude free their run themselves when they return
WORKER_LOST = "PierWorkerLost"  # an activity's error type: its worker is going away
# `run`'s error type when its worker went away once the agent had started (as conclude's WORKER_LOST)
WORKER_LOST_RUNNING = "PierWorkerLostRunning"
WHOLE_RUN = "pier.run"  # a claim that names it: the worker runs the whole lifecycle in one activity
# a stage that timed out (its worker silent) is followed by no release on that worker's queue
NO_RELEASE_TO_A_SILENT_WORKER = "no-release-to-a-silent-worker"


def _worker_lost(exc: ActivityError) -> bool:
    """The activity's worker is going away (it stopped the attempt)."""
    cause = exc.cause
    return isinstance(cause, ApplicationError) and cause.type == WORKER_LOST


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
                claim = await workflow.execute_activity(
                    "pier.claim",
                    tid,
                    task_queue=config["task_queue"],
                    start_to_close_timeout=timedelta(days=30),  # the run's wait in the queue
                    heartbeat_timeout=timedelta(seconds=config["heartbeat_timeout_sec"]),
                    retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
                )
            except BaseException as exc:
                if not is_cancelled_exception(exc):
                    raise
                await self._control("pier.cancelled_waiting", spec, config)
                raise
            outcome = await self._on_worker(spec, config, claim)
            if outcome != RESTART:
                return outcome
            await self._control("pier.restarting", {"trajectory_id": tid, "worker": claim["worker"]}, config)

    async def _on_worker(self, spec: dict[str, Any], config: dict[str, Any], claim: dict[str, str]) -> str:
        tid, queue = spec["trajectory_id"], claim["queue"]
        options: dict[str, Any] = {
            "task_queue": queue,
            "schedule_to_start_timeout": timedelta(seconds=config["schedule_to_start_sec"]),
            "heartbeat_timeout": timedelta(seconds=config["heartbeat_timeout_sec"]),
            "start_to_close_timeout": timedelta(seconds=config["run_timeout_sec"]),
            "retry_policy": ONCE,
            "cancellation_type": ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        }
        if claim.get("stage") == WHOLE_RUN:
            return await self._whole_run(spec, config, claim, options)
        # a stage that returned has let the run go (its sandbox deleted, its
        # slot free): release is for the ones that did not (histories from
        # before this change replay with a release after every run)
        released = False
        try:
            try:
                began = await workflow.execute_activity("pier.begin", spec, **options)
            except ActivityError as exc:
                if is_cancelled_exception(exc):
                    # cancelled before begin ended it (it may have waited for a
                    # slot): recorded cancelled unless begin recorded its end
                    await self._control("pier.cancelled_waiting", spec, config)
                    raise
                if _timeout(exc) is not None or _worker_lost(exc):
                    return RESTART  # the sandbox's worker is gone (or going) before the agent started
                raise
            if began != "started":
                released = workflow.patched(RELEASED_BY_STAGE)
                return began
            try:
                concluded = await workflow.execute_activity("pier.conclude", tid, **options)
                released = workflow.patched(RELEASED_BY_STAGE)
                return concluded
            except ActivityError as exc:
                kind = _timeout(exc)
                if kind == TimeoutType.SCHEDULE_TO_START:
                    return RESTART  # the worker went between the halves: the agent never started
                if kind is None or is_cancelled_exception(exc):
                    raise
                return await self._lost(tid, claim, kind, config)
        finally:
            if not released:
                await self._release(tid, queue, config)

    async def _whole_run(
        self, spec: dict[str, Any], config: dict[str, Any], claim: dict[str, str], options: dict[str, Any]
    ) -> str:
        """The lifecycle in one activity: no workflow task and no dispatch
        between its first stages and the agent (what `begin` then `conclude`
        cost on a slot's time)."""
        tid, queue = spec["trajectory_id"], claim["queue"]
        # a run's bound for each half before: the wait for a slot (one run at
        # most, the slot's) and then this run, whole
        options = {**options, "start_to_close_timeout": 2 * options["start_to_close_timeout"]}
        released = False
        try:
            ended = await workflow.execute_activity(WHOLE_RUN, spec, **options)
            released = True
            return ended
        except ActivityError as exc:
            if is_cancelled_exception(exc):
                # recorded cancelled unless the run recorded its end (it may
                # have waited for a slot, or been cancelled mid-stage)
                await self._control("pier.cancelled_waiting", spec, config)
                raise
            kind = _timeout(exc)
            if kind is not None and workflow.patched(NO_RELEASE_TO_A_SILENT_WORKER):
                released = True  # its worker is silent: it cleans up itself once back (its sweep if never)
            if kind == TimeoutType.SCHEDULE_TO_START or _worker_lost(exc):
                return RESTART  # its worker is gone (or going) before the agent started
            if kind is None:
                raise
            return await self._lost(tid, claim, kind, config)
        finally:
            if not released:
                await self._release(tid, queue, config)

    async def _lost(self, tid: str, claim: dict[str, str], kind: TimeoutType, config: dict[str, Any]) -> str:
        """The run's worker went silent mid-stage: a server records it failed, or
        answers "restart" when its agent had not started after all (the run's
        record says; the stage was taken but never ran)."""
        lost = {"trajectory_id": tid, "worker": claim["worker"], "timeout": kind.name.lower()}
        return str(await self._control("pier.lost", lost, config))

    async def _release(self, tid: str, queue: str, config: dict[str, Any]) -> None:
        """Delete the sandbox and free the slot, on the sandbox's host; when
        that host is gone, its sweep removes what it left."""
        try:
            await workflow.execute_activity(
                "pier.release",
                tid,
                task_queue=queue,
                schedule_to_start_timeout=timedelta(seconds=config["schedule_to_start_sec"]),
                start_to_close_timeout=timedelta(seconds=config["cleanup_timeout_sec"]),
                # a frozen worker may be handed it: its silence ends the wait
                heartbeat_timeout=timedelta(seconds=config["heartbeat_timeout_sec"]),
                retry_policy=ONCE,
            )
        except ActivityError:
            workflow.logger.warning("run %s: its worker did not release it (gone?)", tid)
        except asyncio.CancelledError:
            pass

    async def _webhook(self, spec: dict[str, Any], config: dict[str, Any]) -> None:
        await queue_webhook(spec, config)

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


async def queue_webhook(spec: dict[str, Any], config: dict[str, Any]) -> None:
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
