"""The activities of a workflow task's steps on the fleet (the workflow is
steps.py): every `pier worker` polls the steps queue with them, up
to PIER_WORKER_STEPS at once. Each builds the run's context from its spec and
its record (any worker may take any step), runs one call of
pier.lifecycle.workflow's fleet functions in a thread, heartbeating, and
answers what the workflow keeps in its history.

A step's activity that is cancelled stops writing to the run: the run was
cancelled (the workflow records it), this worker was declared lost (the step
runs again on another), or this worker stops (PIER_DRAIN_TIMEOUT_SEC let the
step finish first; else it is handed back, tried again elsewhere).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from pier.errors import PierError
from pier.executors.base import Job
from pier.executors.ports import ChildRuns, LifecycleHooks
from pier.executors.spec import RunSpec
from pier.executors.temporal.executor import fair_share
from pier.executors.temporal.workflow import WORKER_LOST
from pier.lifecycle import workflow as steps
from pier.lifecycle.context import RunContext
from pier.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")
HEARTBEAT_EVERY_SEC = 1.0


class StepActivities:
    def __init__(self, hooks: LifecycleHooks, settings: Settings, identity: str):
        self.hooks = hooks
        self.store = hooks.store
        self.settings = settings
        self.identity = identity
        self.stopping = False
        self._pool = ThreadPoolExecutor(
            max_workers=settings.worker_steps + 2, thread_name_prefix="pier-steps"
        )

    def activities(self) -> list[Callable[..., Any]]:
        return [self.begin, self.step, self.fan_out, self.child, self.gather, self.end]

    @activity.defn(name="pier.steps.begin")
    async def begin(self, raw: dict[str, Any]) -> dict[str, Any]:
        def work(box: dict[str, Any]) -> dict[str, Any]:
            spec = RunSpec.model_validate(raw)
            record = self.store.get_run(spec.trajectory_id)
            if record.status.terminal:  # ended meanwhile (cancelled from the API)
                return {"ended": record.status.value}
            job = Job(spec.trajectory_id, spec.open(self.hooks.vault))
            try:
                ctx = box["ctx"] = self.hooks.context(job)
            except Exception as exc:  # e.g. a secret it reads was deleted meanwhile
                self.hooks.ended(job, None, exc)
                return {"ended": self.store.get_run(spec.trajectory_id).status.value}
            ctx.log(f"worker {self.identity} runs it", ctx.task.steps[0])
            return steps.begin_steps(ctx)

        return await self._supervise(work)

    @activity.defn(name="pier.steps.step")
    async def step(self, arg: dict[str, Any]) -> dict[str, Any]:
        def work(box: dict[str, Any]) -> dict[str, Any]:
            ctx = box["ctx"] = self._context(arg["spec"])
            self._taken(ctx, arg["step"], box["attempt"])
            return steps.run_one_step(ctx, arg["step"], arg["context"])

        return await self._supervise(work)

    @activity.defn(name="pier.steps.fan_out")
    async def fan_out(self, arg: dict[str, Any]) -> dict[str, Any]:
        def work(box: dict[str, Any]) -> dict[str, Any]:
            ctx = box["ctx"] = self._context(arg["spec"])
            self._taken(ctx, arg["step"], box["attempt"])
            return steps.plan_fan_out(ctx, arg["step"], arg["context"])

        return await self._supervise(work)

    @activity.defn(name="pier.steps.child")
    async def child(self, arg: dict[str, Any]) -> dict[str, Any]:
        """One item's child: its pending record (the one stored already when
        this activity is tried again), and the spec its workflow runs it from."""

        def work(box: dict[str, Any]) -> dict[str, Any]:
            ctx = box["ctx"] = self._context(arg["spec"])
            children = ctx.children
            assert isinstance(children, ChildRuns)
            tid, name = arg["trajectory_id"], arg["step"]
            try:
                payload = children.payload(ctx.record, arg["task"], arg["init_params"])
            except PierError as exc:  # no such task: this item fails, saying so
                return {"error": str(exc)}
            children.create(ctx.record, name, payload, tid)
            steps.note_child(ctx, name, int(arg["index"]), tid)
            spec = RunSpec.seal(tid, payload, self.hooks.vault)
            return {
                "trajectory_id": tid,
                "steps": payload.task.is_workflow,
                "spec": spec.model_dump(mode="json"),
                # the child's place in the fleet's fair dispatch: its collection's, as any run's
                "fairness_key": fair_share(Job(tid, payload)).fairness_key,
            }

        return await self._supervise(work)

    @activity.defn(name="pier.steps.gather")
    async def gather(self, arg: dict[str, Any]) -> dict[str, Any]:
        def work(box: dict[str, Any]) -> dict[str, Any]:
            ctx = box["ctx"] = self._context(arg["spec"])
            return steps.gather_fan_out(
                ctx, arg["step"], arg["task"], arg["children"], bool(arg["continue_on_error"]), arg["context"]
            )

        return await self._supervise(work)

    @activity.defn(name="pier.steps.end")
    async def end(self, arg: dict[str, Any]) -> str:
        def work(box: dict[str, Any]) -> str:
            spec = RunSpec.model_validate(arg["spec"])
            record = self.store.get_run(spec.trajectory_id)
            if record.status.terminal:
                return record.status.value
            job = Job(spec.trajectory_id, spec.open(self.hooks.vault))
            ctx = box["ctx"] = self.hooks.context(job)
            ended = steps.end_steps(
                ctx, arg.get("skipped") or {}, bool(arg.get("cancelled")), arg.get("error")
            )
            self.hooks.finished(spec.trajectory_id, job.payload, ended)
            return ended.status.value

        return await self._supervise(work)

    # helpers

    def _context(self, raw: dict[str, Any]) -> RunContext:
        spec = RunSpec.model_validate(raw)
        return self.hooks.context(Job(spec.trajectory_id, spec.open(self.hooks.vault)))

    def _taken(self, ctx: RunContext, name: str, attempt: int) -> None:
        again = f" (attempt {attempt}: the one before did not finish)" if attempt > 1 else ""
        ctx.log(f"worker {self.identity} runs step {name}{again}", name)

    async def _supervise(self, work: Callable[[dict[str, Any]], T]) -> T:
        """`work` on a thread, heartbeating. Cancelled, the attempt writes
        nothing more to the run (what happens next is the workflow's to say);
        a worker that stops hands the step back to be tried again elsewhere."""
        box: dict[str, Any] = {"attempt": activity.info().attempt}  # the thread is in no activity's context
        future = asyncio.get_running_loop().run_in_executor(self._pool, lambda: work(box))
        try:
            while not future.done():
                activity.heartbeat()
                await asyncio.wait({future}, timeout=HEARTBEAT_EVERY_SEC)
        except asyncio.CancelledError:
            ctx: RunContext | None = box.get("ctx")
            if ctx is not None:
                ctx.save_record = lambda _record: None
                ctx.emit = lambda _stage, _line: None
                ctx.cancel.set()
            if self.stopping:
                raise ApplicationError(f"worker {self.identity} stopped", type=WORKER_LOST) from None
            raise
        return future.result()
