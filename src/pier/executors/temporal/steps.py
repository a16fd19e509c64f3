"""The workflow of a workflow task on the fleet (docs/workflows.md): one per
run, workflow id = the run's trajectory id, as a runbook run's (workflow.py).

It imports only temporalio and the standard library: Temporal replays it in a
sandbox, so it decides and does nothing else. Each step is an activity on the
steps queue, which every `pier worker` polls (step_activities.py):
its result (status, inputs, outputs as the record keeps them, where a branch
goes on) is in this workflow's history, so a worker lost, or restarted,
mid-workflow costs the step it was running (tried again on another worker),
never one that finished. The context each step reads (`init_params`,
`<step>.inputs`, `<step>.outputs`) is built here from those results.

A fan-out (`list_emit_await`) is three kinds of activity and a child workflow
per item: `fan_out` reads its parameters; per item, `child` stores the child's
pending record (its trajectory id made here, so an activity tried again
stores no second one) and the child workflow runs it, an ordinary run (a
runbook child claims a worker's run slot like any run; a workflow child is a
workflow like this one) of the parent's collection, linked to its parent.
At most `max_concurrency` children are open at once, whichever workers run
them; `gather` then records the step's outputs from the children's records.
Cancelling the run cancels the step running and the open children (each ends
cancelled), and starts no more; `end` records the run's end either way.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy
from temporalio.exceptions import ActivityError, ChildWorkflowError, is_cancelled_exception

from pier.executors.temporal.workflow import WORKFLOW, queue_webhook

STEPS_WORKFLOW = "pier-steps"
FAN_OUT = "list_emit_await"


@workflow.defn(name=STEPS_WORKFLOW)
class StepsWorkflow:
    def __init__(self) -> None:
        self._skipped: dict[str, str | None] = {}  # steps not run, and why (None: a step before failed)
        self._open = 0  # the children running now

    @workflow.run
    async def run(self, spec: dict[str, Any], config: dict[str, Any]) -> str:
        try:
            outcome = await self._run(spec, config)
        except BaseException as exc:
            if is_cancelled_exception(exc):
                await self._end(spec, config, cancelled=True)
                await queue_webhook(spec, config)
            elif isinstance(exc, ActivityError):  # a step's activity gave up (its tries are spent)
                await self._end(spec, config, error=f"the workflow could not go on: {exc.cause or exc}")
                await queue_webhook(spec, config)
            raise
        await queue_webhook(spec, config)
        return outcome

    async def _run(self, spec: dict[str, Any], config: dict[str, Any]) -> str:
        begun = await self._step("pier.steps.begin", spec, config)
        if begun.get("ended"):  # ended before it started (cancelled, or it could not start)
            return str(begun["ended"])
        context: dict[str, Any] = {"init_params": begun["init_params"]}
        branch_skipped: set[str] = set()
        goto: str | None = None
        failed = False
        for step in begun["steps"]:
            name = step["name"]
            if goto is not None and name != goto:
                self._skipped[name] = "skipped: a conditional_branch went on at " + goto
                continue
            goto = None
            if failed:
                self._skipped[name] = None
                continue
            if name in branch_skipped:
                self._skipped[name] = "skipped: the branch not taken"
                continue
            arg = {"spec": spec, "step": name, "context": context}
            if step["activity"] == FAN_OUT:
                result = await self._fan_out(arg, config)
            else:
                result = await self._step("pier.steps.step", arg, config)
            context[name] = {"inputs": result["inputs"], "outputs": result["outputs"]}
            if result["status"] != "completed":
                failed = True
                continue
            goto = result.get("next_step") or None
            if result.get("skip"):
                branch_skipped.add(result["skip"])
        return await self._end(spec, config)

    async def _fan_out(self, arg: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        plan = await self._step("pier.steps.fan_out", arg, config)
        if plan["status"] != "running":
            return plan
        spec, name = arg["spec"], arg["step"]
        limit = int(plan["max_concurrency"])
        children: list[dict[str, Any] | None] = [None] * len(plan["inits"])
        running: list[asyncio.Task[None]] = []
        try:
            for index, init in enumerate(plan["inits"]):
                await workflow.wait_condition(lambda: self._open < limit)
                tid = workflow.uuid4().hex
                child = await self._step(
                    "pier.steps.child",
                    {"spec": spec, "step": name, "index": index, "task": plan["task"], "init_params": init,
                     "trajectory_id": tid},
                    config,
                )  # fmt: skip
                if child.get("error"):  # no such task, say
                    children[index] = {"index": index, "trajectory_id": None, "error": child["error"]}
                    continue
                ref: dict[str, Any] = {"index": index, "trajectory_id": tid, "error": None}
                children[index] = ref
                self._open += 1
                running.append(asyncio.create_task(self._child(child, config, ref)))
            await asyncio.gather(*running)
        except BaseException:
            # cancelled (or a child could not be stored): the open children are
            # cancelled, and their workflows record their ends before this one goes on
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
        gather = {
            **arg,
            "task": plan["task"],
            "children": children,
            "continue_on_error": plan["continue_on_error"],
        }
        return await self._step("pier.steps.gather", gather, config)

    async def _child(self, child: dict[str, Any], config: dict[str, Any], ref: dict[str, Any]) -> None:
        """One child, run to its end by its own workflow (its record says how it ended)."""
        try:
            await workflow.execute_child_workflow(
                STEPS_WORKFLOW if child["steps"] else WORKFLOW,
                args=[child["spec"], config],
                id=child["trajectory_id"],
                task_queue=config["task_queue"],
                priority=Priority(fairness_key=child["fairness_key"])
                if child.get("fairness_key")
                else Priority.default,
            )
        except ChildWorkflowError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the parent is cancelled: so is its fan-out
                raise
            # the child's own end (its workflow failed, or it was cancelled by itself): its item's error
            ref["error"] = f"its workflow ended: {exc.cause or exc}"
        finally:
            self._open -= 1

    async def _end(
        self, spec: dict[str, Any], config: dict[str, Any], cancelled: bool = False, error: str | None = None
    ) -> str:
        arg = {"spec": spec, "skipped": self._skipped, "cancelled": cancelled, "error": error}
        return str(await self._step("pier.steps.end", arg, config))

    async def _step(self, name: str, arg: Any, config: dict[str, Any]) -> Any:
        """An activity on the steps queue: whichever worker takes it; a
        worker lost (its heartbeat stops) or stopping hands it to another."""
        return await workflow.execute_activity(
            name,
            arg,
            task_queue=config["steps_queue"],
            start_to_close_timeout=timedelta(seconds=config["run_timeout_sec"]),
            heartbeat_timeout=timedelta(seconds=config["heartbeat_timeout_sec"]),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                maximum_interval=timedelta(seconds=10),
                maximum_attempts=config.get("step_attempts", 20),
            ),
        )
