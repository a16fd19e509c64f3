"""The workflow executor: a task's steps, run in order, beside the runbook
runner (pier.lifecycle.runner hands a workflow task here; a runbook task's
path is untouched). Each step's parameters are read (literal or by path) from
init_params and earlier steps' inputs and outputs, its activity runs, and its
inputs, outputs, timing and error go into the run's record under its name
(`steps.<name>`). The first step that fails fails the run, naming the step;
the steps after it are skipped. docs/workflows.md describes each activity."""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pier.agents.upstreams import Upstreams
from pier.errors import PierError
from pier.gateway.grants import Budget
from pier.lifecycle import models
from pier.lifecycle.context import RunContext, scratch_dir
from pier.lifecycle.outcomes import Outcome as RunOutcome
from pier.lifecycle.save import publish_retried
from pier.record import ActivityOutputs, RunStatus, StageStatus, Step, Trajectory, utcnow
from pier.sandbox.owner import owner_label
from pier.tasks.paths import PathError, lookup_path
from pier.tasks.workflow import (
    ACTIVITIES,
    LLM_ACTIVITIES,
    ConditionalBranch,
    ExtractFromTrajectories,
    GeminiImageGenerator,
    ListEmitAwait,
    LitellmChat,
    LitellmImageGeneration,
    LitellmVision,
    ReplicateRun,
    ReplicateText2Image,
    ReplicateText2Video,
    ScoreRange,
    SimpleJudge,
    TextConcatenate,
    TextEcho,
    TextSplit,
    TextTemplate,
    resolve_params,
)

if TYPE_CHECKING:
    from pier.gateway.server import Gateway

log = logging.getLogger(__name__)


class Children(Protocol):
    """How a fan-out starts its children: each an ordinary run of the parent's
    collection (its own record, log and outputs), linked to the parent."""

    def run(
        self, parent: Trajectory, step: str, task: str, init_params: dict[str, Any],
        created: Callable[[str], None] | None = None, purse: Purse | None = None,
    ) -> Trajectory:  # fmt: skip
        """Run the child to its end (in this thread) and answer its record;
        `created` is told its trajectory id once its record is stored; a
        workflow child's model steps spend from `purse` (its parent's budget)."""

    def get(self, trajectory_id: str) -> Trajectory: ...

    def end_lost(self, child: Trajectory, message: str) -> None:
        """End a child whose process is gone (failed, saying so)."""

    def waiting(self, log: Callable[[str], None] | None = None) -> AbstractContextManager[None]:
        """The parent waits on its children: the run slot it holds is theirs
        meanwhile (its collection's quota counts the children, not it), and
        it takes one back after; `log` is told when it has to wait for it."""


class StepFailed(PierError):
    """A step's activity could not do what it was asked; the message says why."""


@dataclass
class Outcome:
    outputs: dict[str, Any]
    next_step: str | None = None  # conditional_branch: where to go on
    skip: str | None = None  # conditional_branch: the branch not taken
    usage: dict[str, Any] | None = None


Runner = Callable[[RunContext, str, Any], Outcome]

_SPENT_KEYS = (("requests", "requests"), ("tokens", "total_tokens"), ("cost_usd", "cost_usd"))


class Purse:
    """A workflow's model budget (init_params.model_budget), shared by its own
    model steps and every child of its fan-outs (and theirs): each model call
    is admitted against what the whole tree has spent, a request reserved
    before it is made, so children running at once cannot each spend the
    parent's remainder. A runbook child gets what is left as its own
    model_budget when it starts, and what it spent is counted when it ends."""

    def __init__(self, budget: Budget | None, spent: Mapping[str, Any], invalid: str | None = None):
        self.budget = budget
        self.invalid = invalid  # why init_params.model_budget is not a budget: each model step fails so
        self._spent = {used: float(spent.get(used, 0) or 0) for _k, used in _SPENT_KEYS}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, params: Mapping[str, Any], spent: Mapping[str, Any]) -> Purse:
        raw = params.get("model_budget")
        if raw is None or raw == {}:
            return cls(None, spent)
        try:
            return cls(Budget.model_validate(raw), spent)
        except ValueError as exc:  # pydantic's ValidationError
            return cls(
                None, spent, f"init_params.model_budget is not a budget (requests, tokens, cost_usd): {exc}"
            )

    def _left(self) -> dict[str, Any]:
        left: dict[str, Any] = {}
        if self.budget is None:
            return left
        for key, used in _SPENT_KEYS:
            limit = getattr(self.budget, key)
            if limit is not None:
                left[key] = limit - self._spent[used]
        return left

    def admit(self) -> Budget:
        """Reserve one request; the budget the call's grant gets (what is left
        of each limit). StepFailed when something is used up."""
        if self.invalid:
            raise StepFailed(self.invalid)
        with self._lock:
            left = self._left()
            for key, remaining in left.items():
                if remaining <= 0:
                    used = dict(_SPENT_KEYS)[key]
                    limit = getattr(self.budget, key)
                    raise StepFailed(
                        f"the run's model budget was used up ({self._spent[used]:g} {used} of {limit:g}, "
                        "its fan-outs' children included) before this step: raise init_params.model_budget"
                    )
            self._spent["requests"] += 1
        return Budget.model_validate({k: v if k == "cost_usd" else int(v) for k, v in left.items()})

    def spend(self, usage: Mapping[str, Any], reserved: int = 1) -> None:
        """Count a call's (or a runbook child's) usage; `reserved` requests were counted by admit."""
        with self._lock:
            for _key, used in _SPENT_KEYS:
                value = usage.get(used)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    self._spent[used] += value - (reserved if used == "requests" else 0)

    def child_budget(self) -> dict[str, Any] | None:
        """A runbook child's model_budget: what is left (None: no budget)."""
        with self._lock:
            left = self._left()
        if not left:
            return None
        return {k: max(v, 0.000001) if k == "cost_usd" else max(int(v), 1) for k, v in left.items()}

    def used_up(self) -> str | None:
        with self._lock:
            for key, remaining in self._left().items():
                if remaining <= 0:
                    return f"{key} {getattr(self.budget, key):g}"
        return None


def lost_child(who: str, parent_id: str) -> str:
    """How a fan-out's child that died with the process running its parent ends
    (a worker taken over, a server restarted): its item starts again."""
    return f"the {who} running its parent {parent_id} was lost; the fan-out started this item again"


def execute_workflow(ctx: RunContext, owned: bool = True) -> Trajectory:
    """Run every step; the record ends completed, failed (naming the step) or
    cancelled. `owned`: this process owns the run (in-process: if it dies,
    whoever notices ends the run); a fleet's run is its Temporal workflow's."""
    record, task = ctx.record, ctx.task
    params = {**task.init_params, **ctx.run_params}
    done = _as_workflow(record, task, params, ctx)
    if ctx.purse is None:  # a top-level run's (a workflow child's is its parent's)
        ctx.purse = Purse.of(params, record.usage)
    record.status, record.started = RunStatus.running, record.started or utcnow()
    record.owner = owner_label() if owned else None
    ctx.save_record(record)
    began = time.monotonic()
    context: dict[str, Any] = {"init_params": params}
    skipped: set[str] = set()
    goto: str | None = None
    try:
        for name in task.steps:
            step = record.steps[name]
            if name in done:  # finished before this process took the run over: kept, not repeated
                context[name] = {"inputs": step.inputs, "outputs": step.outputs.model_dump(mode="json")}
                ctx.log(f"step {name} completed before: kept", name)
                outputs = context[name]["outputs"]
                if step.activity == "conditional_branch":
                    goto = outputs.get("next_step") or None
                    if outputs.get("skipped_step"):
                        skipped.add(outputs["skipped_step"])
                continue
            if goto is not None and name != goto:
                _skip(ctx, step, "skipped: a conditional_branch went on at " + goto)
                continue
            goto = None
            if record.error is not None or ctx.cancel.is_set():
                _skip(ctx, step, None)
                continue
            if name in skipped:
                _skip(ctx, step, "skipped: the branch not taken")
                continue
            outcome = _run_step(ctx, name, step, context)
            if outcome is None:
                continue
            if outcome.next_step:
                goto = outcome.next_step
            if outcome.skip:
                skipped.add(outcome.skip)
    except BaseException as exc:  # an interruption: the step running fails, saying why
        ctx.cancel.set()
        message = f"the run was interrupted: {type(exc).__name__}"
        for step in record.steps.values():
            if step.status == StageStatus.running:
                step.status, step.error = StageStatus.failed, message
        record.fail(next(iter(record.steps)), message)
        raise
    finally:
        _finish(ctx, time.monotonic() - began)
    return record


def _as_workflow(record: Trajectory, task: Any, params: dict[str, Any], ctx: RunContext) -> set[str]:
    """The record's steps as the workflow's, each pending (a record stored
    before the run started may still hold a runbook run's shape). A run taken
    over from a lost worker keeps the steps it completed (their names are
    answered) and what a fan-out it was in had started (ctx.resumed)."""
    configs = {name: task.step_config(name) for name in task.steps}
    before = {n: s for n, s in record.steps.items() if s.status is not None and s.config == configs.get(n)}
    done: set[str] = set()
    for name in task.steps:  # the completed steps up to the first that was not
        if name in before and before[name].status == StageStatus.completed:
            done.add(name)
        elif name in before and before[name].status == StageStatus.skipped:
            continue
        else:
            break
    ctx.resumed = {
        n: s.outputs.model_dump(mode="json")
        for n, s in before.items()
        if n not in done and s.status == StageStatus.running
    }
    record.error, record.failed_stage = None, None
    record.total_steps = list(task.steps)
    record.step_configs = configs
    record.init_params = ctx.redactor.data(params)
    kept = {n: before[n] for n in done}
    record.steps = {
        name: Step(
            activity=record.step_configs[name]["activity"],
            key=name,
            config=record.step_configs[name],
            outputs=ActivityOutputs(),
            depends_on=list(task.steps[:i]),
            status=StageStatus.pending,
            created=record.created,
        )
        for i, name in enumerate(task.steps)
    }
    record.steps.update(kept)
    record.steps = {name: record.steps[name] for name in task.steps}
    return done


def _skip(ctx: RunContext, step: Step, why: str | None) -> None:
    step.status = StageStatus.skipped
    if why:
        ctx.log(why, step.key)


def _run_step(ctx: RunContext, name: str, step: Step, context: dict[str, Any]) -> Outcome | None:
    record = ctx.record
    config = record.step_configs[name]
    _start_step(ctx, name, step)

    def body() -> Outcome:
        inputs, params = resolve_params(name, config, context)
        step.inputs = ctx.redactor.data(inputs)
        ctx.log(f"inputs: {_brief(step.inputs)}", name)
        return RUNNERS[step.activity](ctx, name, params)

    return _end_step(ctx, name, step, context, body, time.monotonic())


def _start_step(ctx: RunContext, name: str, step: Step) -> None:
    step.status, step.created = StageStatus.running, utcnow()
    ctx.save_record(ctx.record)
    ctx.log(f"step {name} ({step.activity}) started", name)


def _end_step(
    ctx: RunContext, name: str, step: Step, context: dict[str, Any], body: Callable[[], Outcome], began: float
) -> Outcome | None:
    """Run the step's body and record how it went: its outputs and the
    usage it reports, or its error (which fails the run, naming the step)."""
    record = ctx.record
    outcome: Outcome | None = None
    try:
        outcome = body()
        step.outputs = ActivityOutputs.model_validate(ctx.redactor.data(outcome.outputs))
        step.status = StageStatus.completed
        if outcome.usage:
            _add_usage(record, outcome.usage)
    except Exception as exc:
        _failed(ctx, name, step, exc)
        outcome = None
    finally:
        step.ended = utcnow()
        step.duration_seconds = round(time.monotonic() - began, 3)
    context[name] = {"inputs": step.inputs, "outputs": step.outputs.model_dump(mode="json")}
    if step.status == StageStatus.completed:
        ctx.log(f"outputs: {_brief(context[name]['outputs'])}", name)
        ctx.log(f"step {name} completed in {step.duration_seconds:.2f}s", name)
    return outcome


def _failed(ctx: RunContext, name: str, step: Step, exc: Exception) -> None:
    """The step failed, and the run with it (naming the step)."""
    message = _message(name, step.activity, exc)
    step.status, step.error = StageStatus.failed, ctx.redactor.text(message)
    ctx.record.fail(name, step.error, _outcome_of(exc).value)
    ctx.log(f"step {name} failed: {step.error}", name)


BRIEF_CHARS = 500  # of a step's inputs or outputs in the log; the record has them whole


def _brief(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return (
        text
        if len(text) <= BRIEF_CHARS
        else text[:BRIEF_CHARS] + f"... ({len(text)} characters; the record has all)"
    )


def _message(name: str, activity: str, exc: Exception) -> str:
    if isinstance(exc, PierError):
        text = str(exc)
        return text if text.startswith(f"step {name!r}") else f"step {name!r} ({activity}): {text}"
    log.error("unexpected error in step %s:\n%s", name, traceback.format_exc())
    return f"step {name!r} ({activity}): internal error: {type(exc).__name__}: {exc}"


def _outcome_of(exc: Exception) -> RunOutcome:
    """A failed step's outcome: the workflow's own failure (an attempt that
    counts in an experiment), its provider's or its budget's; only an
    unexpected error is pier's (infra)."""
    if not isinstance(exc, PierError):
        return RunOutcome.infra
    if "model budget" in str(exc):
        return RunOutcome.budget_exhausted
    if isinstance(exc, models.ModelCallError):
        return RunOutcome.provider_error
    return RunOutcome.step_failed


def _add_usage(record: Trajectory, usage: Mapping[str, Any]) -> None:
    _add_usage_to(record.usage, usage)


def _add_usage_to(total: dict[str, Any], usage: Mapping[str, Any]) -> None:
    for key, value in usage.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            total[key] = round(total.get(key, 0) + value, 6)


def _finish(ctx: RunContext, elapsed: float) -> None:
    record = ctx.record
    if ctx.cancel.is_set():
        status = RunStatus.cancelled
        record.fail(next(iter(record.steps), "run"), "the run was cancelled")
    elif record.error is not None:
        status = RunStatus.failed
    else:
        status = RunStatus.completed
    record.finish(status, utcnow(), round(elapsed, 3))
    ctx.log(
        f"workflow {record.status.value} in {elapsed:.1f}s", record.failed_stage or record.total_steps[-1]
    )
    try:
        ctx.output_dir.mkdir(parents=True, exist_ok=True)
        (ctx.output_dir / "run.json").write_text(record.model_dump_json(indent=2))
        publish_retried(ctx)
    except Exception as exc:  # the record in the store is what counts
        log.warning("could not store run.json of %s: %s", record.trajectory_id, exc)
    finally:
        shutil.rmtree(scratch_dir(ctx.settings, record.trajectory_id), ignore_errors=True)
    ctx.save_record(record)


# the activities


def text_echo(ctx: RunContext, name: str, p: TextEcho) -> Outcome:
    return Outcome({"text": p.text})


_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*\}\}")


def text_template(ctx: RunContext, name: str, p: TextTemplate) -> Outcome:
    missing = sorted({m for m in _PLACEHOLDER.findall(p.template) if m not in p.variables})
    if missing:
        raise StepFailed(
            f"the template's {', '.join('{{' + m + '}}' for m in missing)} "
            f"{'has' if len(missing) == 1 else 'have'} no value: give variables or <name>_path"
        )
    text = _PLACEHOLDER.sub(lambda m: models.as_text(p.variables[m.group(1)]), p.template)
    return Outcome({"text": text})


def text_concatenate(ctx: RunContext, name: str, p: TextConcatenate) -> Outcome:
    return Outcome({"text": p.separator.join(models.as_text(t) for t in p.texts), "count": len(p.texts)})


def split_text(text: str, size: int, overlap: int) -> list[str]:
    """Chunks of `size` characters, each starting `size - overlap` after the one before."""
    if not text:
        return []
    step = size - overlap
    chunks = []
    for start in range(0, len(text), step):
        chunks.append(text[start : start + size])
        if start + size >= len(text):
            break
    return chunks


def text_split(ctx: RunContext, name: str, p: TextSplit) -> Outcome:
    chunks = split_text(p.text, p.chunk_size, p.overlap)
    return Outcome({"chunks": chunks, "count": len(chunks)})


def _test(p: ConditionalBranch) -> bool:
    value, other = p.condition, p.value
    try:
        if p.operator == "equals":
            return value == other
        if p.operator == "not_equals":
            return value != other
        if p.operator == "contains":
            return other in value
        if p.operator == "greater_than":
            return value > other
        if p.operator == "less_than":
            return value < other
    except TypeError as exc:
        raise StepFailed(f"cannot test {value!r} {p.operator} {other!r}: {exc}") from None
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false", "no", "0", "none", "null")
    return bool(value)


def conditional_branch(ctx: RunContext, name: str, p: ConditionalBranch) -> Outcome:
    held = _test(p)
    chosen, other = (p.true_step, p.false_step) if held else (p.false_step, p.true_step)
    ctx.log(
        f"condition {'holds' if held else 'does not hold'}: going on at {chosen or 'the next step'}", name
    )
    outputs = {"result": held, "next_step": chosen, "skipped_step": other}
    return Outcome(outputs, next_step=chosen, skip=other if other != chosen else None)


def list_emit_await(ctx: RunContext, name: str, p: ListEmitAwait) -> Outcome:
    children = ctx.children
    if children is None:
        raise StepFailed(
            "this process cannot start child runs (a fan-out runs under pier serve or pier worker)"
        )
    task = _child_task(ctx, p)
    results: list[Trajectory | None] = [None] * len(p.items)
    errors: list[str | None] = [None] * len(p.items)
    lock = threading.Lock()
    step = ctx.record.steps[name]
    started: dict[int, str] = {}  # index -> child trajectory id, kept in the record as each starts
    earlier = {
        ref["index"]: ref["trajectory_id"]
        for ref in (ctx.resumed.get(name) or {}).get("started", [])
        if isinstance(ref, dict) and isinstance(ref.get("index"), int) and ref["index"] < len(p.items)
    }
    ctx.log(f"fanning {task} out over {len(p.items)} items, {p.max_concurrency} at once", name)

    def note(index: int, tid: str) -> None:
        with lock:
            started[index] = tid
            step.outputs = ActivityOutputs(
                started=[{"index": i, "trajectory_id": t} for i, t in sorted(started.items())]
            )
            ctx.save_record(ctx.record)  # a worker lost from here on: the next one knows this child

    def reuse(index: int) -> Trajectory | None:
        """The child an earlier worker started for this item: kept when it
        ended; one that was still running died with that worker and ends now."""
        tid = earlier.get(index)
        if tid is None:
            return None
        try:
            child = children.get(tid)
        except PierError:
            return None
        if child.status.terminal:
            note(index, tid)
            return child
        children.end_lost(child, lost_child("worker", ctx.record.trajectory_id))
        return None

    def one(index: int) -> None:
        if ctx.cancel.is_set():
            errors[index] = "not started: the run was cancelled"
            return
        child = reuse(index)
        if child is None:
            init = {**p.child_init_params, p.item_param_name: p.items[index]}
            purse: Purse | None = ctx.purse
            if purse is not None and purse.budget is not None:
                spent = purse.used_up()
                if spent is not None:
                    errors[index] = f"not started: the run's model budget ({spent}) was used up"
                    return
            try:
                child = children.run(ctx.record, name, task, init, lambda tid: note(index, tid), purse)
            except Exception as exc:  # could not even start (no such task)
                errors[index] = str(exc)
                return
        with lock:
            results[index] = child
        if child.status != RunStatus.completed:
            errors[index] = child.error or child.status.value

    back = lambda why: ctx.log(f"children done; waiting for a run slot to go on: {why}", name)  # noqa: E731
    with children.waiting(back), ThreadPoolExecutor(max_workers=p.max_concurrency,
                                                    thread_name_prefix=f"pier-fanout-{name}") as pool:  # fmt: skip
        list(pool.map(one, range(len(p.items))))
    return _fan_out_outcome(task, results, errors, p.continue_on_error)


def _child_task(ctx: RunContext, p: ListEmitAwait) -> str:
    """The children's task: one of the parent's own collection."""
    if "/" not in p.child_workflow_name:
        return p.child_workflow_name
    collection, _, task = p.child_workflow_name.partition("/")
    if collection != ctx.record.collection:
        raise StepFailed(
            f"child_workflow_name {p.child_workflow_name!r} is in another collection: "
            "a fan-out's children are tasks of the parent's own collection"
        )
    return task


def _fan_out_outcome(
    task: str, results: list[Trajectory | None], errors: list[str | None], continue_on_error: bool
) -> Outcome:
    """The fan-out's outputs from its children's records (in item order), or
    StepFailed when one failed and continue_on_error is not set."""
    references = [
        {
            "trajectory_id": r.trajectory_id, "name": r.name, "collection": r.collection,
            "workflow_id": r.workflow_id, "status": r.status.value, "index": i,
            "storage_path": r.storage_path, "error": r.error,
        }
        for i, r in enumerate(results) if r is not None
    ]  # fmt: skip
    failed = [(i, e) for i, e in enumerate(errors) if e]
    usage: dict[str, Any] = {}  # the children's, counted in the run's (their purse is its)
    for r in results:
        if r is not None:
            _add_usage_to(usage, r.usage or _runbook_usage(r))
    outputs = {
        "trajectory_references": references,
        "usage": usage,
        "count": len(results),
        "completed": sum(1 for r in references if r["status"] == "completed"),
        "failed": len(failed),
        "errors": [{"index": i, "error": e} for i, e in failed],
    }
    if failed and not continue_on_error:
        i, e = failed[0]
        raise StepFailed(
            f"{len(failed)} of {len(results)} children of {task} failed (item {i}: {e}); "
            "set continue_on_error to go on without them"
        )
    return Outcome(outputs, usage=usage)


def _runbook_usage(child: Trajectory) -> Mapping[str, Any]:
    step = child.steps.get("run")
    usage = step.outputs.model_dump(mode="json").get("usage") if step is not None else None
    return usage if isinstance(usage, Mapping) else {}


def _child_context(child: Trajectory) -> dict[str, Any]:
    context: dict[str, Any] = {"init_params": child.init_params}
    for step_name, step in child.steps.items():
        context[step_name] = {"inputs": step.inputs, "outputs": step.outputs.model_dump(mode="json")}
    return context


def extract_from_trajectories(ctx: RunContext, name: str, p: ExtractFromTrajectories) -> Outcome:
    children = ctx.children
    if children is None:
        raise StepFailed("this process cannot read child runs")
    rows: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    columns: dict[str, list[Any]] = {key: [] for key in p.extract_keys}
    for ref in p.trajectory_list:
        tid = ref.get("trajectory_id") if isinstance(ref, Mapping) else ref
        if not isinstance(tid, str):
            raise StepFailed(
                f"{ref!r} is not a trajectory reference (an object with trajectory_id, or an id)"
            )
        child = children.get(tid)
        if child.collection != ctx.record.collection:
            raise StepFailed(f"trajectory {tid} is not a run of collection {ctx.record.collection!r}")
        context = _child_context(child)
        row: dict[str, Any] = {"trajectory_id": tid}
        for key, path in p.extract_keys.items():
            try:
                value = lookup_path(path, context)
            except PathError as exc:
                if child.status == RunStatus.completed:
                    raise StepFailed(f"extract_keys.{key}: child {tid} ({child.name}): {exc}") from None
                value = None
                problems.append(
                    {"trajectory_id": tid, "key": key, "error": child.error or child.status.value}
                )
            row[key] = value
            if p.flatten_results and isinstance(value, list):
                columns[key].extend(value)
            else:
                columns[key].append(value)
        rows.append(row)
    return Outcome({"extracted_data": rows, **columns, "count": len(rows), "errors": problems})


def _gateway(ctx: RunContext) -> Gateway | None:
    """pier's model gateway, on loopback (pier itself is the caller), unless PIER_GATEWAY is off."""
    if not ctx.settings.gateway:
        return None
    from pier.gateway.server import shared_gateway

    # The same loopback gateway as the chat-completions passthrough's, under the server's outbound policy.
    return shared_gateway("127.0.0.1", 0, ctx.settings.ca_bundle, ctx.settings.outbound)


def _ask(
    ctx: RunContext, model: str, provider: str | None, messages: list[dict[str, Any]], **kw: Any
) -> models.ChatAnswer:
    """One model call, admitted against the run's purse (its fan-outs' children's spend included)."""
    purse: Purse = ctx.purse if ctx.purse is not None else Purse(None, {})
    budget = purse.admit()
    answer: models.ChatAnswer | None = None
    try:
        answer = models.chat(
            trajectory_id=ctx.record.trajectory_id,
            model=model,
            provider=provider,
            messages=messages,
            env=ctx.inputs.env,
            gateway=_gateway(ctx),
            budget=budget,
            policy=ctx.settings.outbound,
            upstreams=Upstreams.of(ctx.settings, ctx.record.collection),
            operator_keys=ctx.inputs.operator_keys,
            **kw,
        )
    finally:
        purse.spend(answer.usage if answer is not None else {"requests": 1})
    return answer


def litellm_chat(ctx: RunContext, name: str, p: LitellmChat) -> Outcome:
    messages = [{"role": "system", "content": p.system_prompt}] if p.system_prompt else []
    messages.append({"role": "user", "content": models.as_text(p.prompt)})
    answer = _ask(
        ctx, p.model, p.model_provider, messages,
        temperature=p.temperature, max_tokens=p.max_tokens, response_format=p.response_format,
    )  # fmt: skip
    outputs: dict[str, Any] = {
        "text": answer.text, "model": answer.model, "provider": answer.provider,
        "finish_reason": answer.finish_reason, "usage": answer.usage,
    }  # fmt: skip
    if p.response_format is not None:
        try:
            outputs["json"] = json.loads(answer.text)
        except ValueError:
            outputs["json"] = None
    ctx.log(f"{answer.provider} {answer.model}: {len(answer.text)} characters, usage {answer.usage}", name)
    return Outcome(outputs, usage=answer.usage)


def _judge_prompt(p: SimpleJudge, items: list[Any], categorical: bool, explain: bool) -> str:
    lines = [f"Instruction: {p.instruction}", ""]
    for i, item in enumerate(items, 1):
        lines += [f"--- item {i} ---", models.as_text(item), ""]
    if categorical:
        assert p.categories
        lines.append(f"Answer with exactly one of these categories: {', '.join(p.categories)}.")
        shape = '{"category": "<one of them>"' + (', "explanation": "<why>"' if explain else "") + "}"
    else:
        rng = p.score_range or ScoreRange()
        lines.append(f"Score from {rng.min:g} to {rng.max:g}.")
        shape = '{"score": <number>' + (', "explanation": "<why>"' if explain else "") + "}"
    lines.append(f"Reply with only this JSON object: {shape}")
    return "\n".join(lines)


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def simple_judge(ctx: RunContext, name: str, p: SimpleJudge) -> Outcome:
    items = list(p.items) if p.items else [p.item]
    categorical = p.judge_type == "categorical" or (p.judge_type is None and bool(p.categories))
    explain = p.explanation_required or bool(p.with_explanation)
    messages = [
        {
            "role": "system",
            "content": "You are a careful, impartial judge. You reply with one JSON object only.",
        },
        {"role": "user", "content": _judge_prompt(p, items, categorical, explain)},
    ]
    answer = _ask(ctx, p.model, p.model_provider, messages, temperature=p.temperature)
    found = _JSON_OBJECT.search(answer.text)
    try:
        verdict = json.loads(found.group(0)) if found else None
    except ValueError:
        verdict = None
    if not isinstance(verdict, dict):
        raise StepFailed(f"the judge's answer is not the JSON object it was asked for: {answer.text[:200]!r}")
    outputs: dict[str, Any] = {
        "raw": answer.text,
        "model": answer.model,
        "usage": answer.usage,
        "items": len(items),
    }
    if categorical:
        category = verdict.get("category")
        if category not in (p.categories or []):
            raise StepFailed(f"the judge answered category {category!r}, not one of {p.categories}")
        outputs["category"] = category
        outputs["result"] = category
    else:
        rng = p.score_range or ScoreRange()
        score = verdict.get("score")
        if not isinstance(score, int | float) or isinstance(score, bool) or not rng.min <= score <= rng.max:
            raise StepFailed(
                f"the judge answered score {score!r}, not a number from {rng.min:g} to {rng.max:g}"
            )
        outputs["score"] = score
        outputs["result"] = score
    if explain:
        outputs["explanation"] = verdict.get("explanation")
    return Outcome(outputs, usage=answer.usage)


# vision, images and videos (pier.lifecycle.media)


def _media_route(ctx: RunContext, provider: str, model: str):  # type: ignore[no-untyped-def]
    from pier.lifecycle import media

    choice = media.choose(provider, model, ctx.inputs.env, Upstreams.of(ctx.settings, ctx.record.collection),
                          ctx.inputs.operator_keys)  # fmt: skip
    purse: Purse = ctx.purse if ctx.purse is not None else Purse(None, {})
    return choice, purse, media.route(ctx.record.trajectory_id, choice, _gateway(ctx), purse.admit(),
                                      ctx.settings.outbound)  # fmt: skip


def _store_media(ctx: RunContext, name: str, made: list[Any], start: int = 0) -> list[dict[str, Any]]:
    """Write what a provider made into the run's files (published at once, so
    a later step and the web UI read them by path): one entry each."""
    from pier.lifecycle import media

    ctx.output_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, item in enumerate(made, start):
        ext = media.extension(item.content_type)
        filename = f"{name}.{i:04d}.{ext}"
        (ctx.output_dir / filename).write_bytes(item.data)
        entries.append({"path": f"{ctx.record.storage_path}/{filename}", "name": filename, "extension": ext,
                        "content_type": item.content_type, "size": len(item.data)})  # fmt: skip
    if entries:
        publish_retried(ctx)
    return entries


def _media_call(
    ctx: RunContext, name: str, provider: str, model: str, call: Callable[[Any, str], Any]
) -> tuple[Any, dict[str, Any]]:
    """Run `call(route, model)` through the gateway; (its answer, the call's usage), the purse charged."""
    from pier.lifecycle import media

    choice, purse, routed = _media_route(ctx, provider, model)
    usage: dict[str, Any] = {"requests": 1}
    try:
        with routed as road:
            try:
                answer = call(road, choice.model or model)
            except PierError:
                usage = road.usage()
                raise
            except Exception as exc:  # the SDKs' errors: status, refusal, connection
                usage = road.usage()
                raise media.failed(choice, model, road, exc) from None
            usage = road.usage(
                answer[-1] if isinstance(answer, tuple) and isinstance(answer[-1], dict) else None
            )
    finally:
        purse.spend(usage)
    ctx.log(f"{choice.name} {model}: usage {usage}", name)
    return answer, usage


def litellm_vision(ctx: RunContext, name: str, p: LitellmVision) -> Outcome:
    from pier.lifecycle import media

    if p.image_url is not None:
        image = p.image_url
        if not image.startswith(("http://", "https://")):
            raise StepFailed(
                f"image_url {image[:80]!r} is not an http(s) URL (a stored file goes in image_path_expr)"
            )
    else:
        path = p.image_path_expr
        if isinstance(path, Mapping):  # an images[] entry itself
            path = path.get("path")
        if not isinstance(path, str):
            raise StepFailed(f"image_path_expr read {path!r}, not a stored file's path")
        if ctx.storage is None:
            raise StepFailed("this process has no run storage to read the image from")
        found = media.read_stored_image(ctx.storage, ctx.record.collection, path, ctx.output_dir,
                                        ctx.record.storage_path)  # fmt: skip
        image = media.image_part(found.data, found.content_type)
    prompt = models.as_text(p.prompt)
    choice = models.choose(p.model, p.model_provider, ctx.inputs.env, Upstreams.of(ctx.settings, ctx.record.collection),
                           ctx.inputs.operator_keys)  # fmt: skip
    if choice.name == "anthropic":
        messages: list[dict[str, Any]] = (
            [{"role": "system", "content": p.system_prompt}] if p.system_prompt else []
        )
        messages.append({"role": "user", "content": media.anthropic_content(prompt, image)})
    else:
        messages = media.vision_messages(p.system_prompt, prompt, image)
    answer = _ask(
        ctx, p.model, p.model_provider, messages, temperature=p.temperature, max_tokens=p.max_tokens
    )
    ctx.log(f"{answer.provider} {answer.model}: {len(answer.text)} characters, usage {answer.usage}", name)
    outputs = {"text": answer.text, "model": answer.model, "provider": answer.provider,
               "finish_reason": answer.finish_reason, "usage": answer.usage}  # fmt: skip
    return Outcome(outputs, usage=answer.usage)


def _replicate(ctx: RunContext, name: str, model: str, inputs: dict[str, Any], key: str) -> Outcome:
    from pier.lifecycle import media

    def call(road: Any, bare: str) -> tuple[Any, list[Any]]:
        output = media.replicate_run(road, bare, inputs)
        return output, [media.fetch(url, road.allowed) for url in media.urls_in(output)]

    (output, made), usage = _media_call(ctx, name, "replicate", model, call)
    files = _store_media(ctx, name, made)
    outputs: dict[str, Any] = {"output": output, "files": files, "model": model, "usage": usage}
    if key != "files":
        outputs[key] = files
    return Outcome(outputs, usage=usage)


def replicate_text2image(ctx: RunContext, name: str, p: ReplicateText2Image) -> Outcome:
    given = {"prompt": p.prompt, "width": p.width, "height": p.height, "num_outputs": p.num_outputs,
             "aspect_ratio": p.aspect_ratio}  # fmt: skip
    return _replicate(
        ctx, name, p.model, {**p.input, **{k: v for k, v in given.items() if v is not None}}, "images"
    )


def replicate_text2video(ctx: RunContext, name: str, p: ReplicateText2Video) -> Outcome:
    return _replicate(ctx, name, p.model, {**p.input, "prompt": p.prompt}, "videos")


def replicate_run(ctx: RunContext, name: str, p: ReplicateRun) -> Outcome:
    return _replicate(ctx, name, p.model, dict(p.input), "files")


def gemini_image_generator(ctx: RunContext, name: str, p: GeminiImageGenerator) -> Outcome:
    from pier.lifecycle import media

    (made, text, _reported), usage = _media_call(
        ctx, name, "google", p.model, lambda road, bare: media.gemini_images(road, bare, p.prompt)
    )
    if not made:
        raise StepFailed(f"{p.model} answered no image{': ' + text[:200] if text else ''}")
    images = _store_media(ctx, name, made)
    return Outcome({"images": images, "text": text, "model": p.model, "usage": usage}, usage=usage)


def litellm_image_generation(ctx: RunContext, name: str, p: LitellmImageGeneration) -> Outcome:
    from pier.lifecycle import media

    extra = {k: v for k, v in (("size", p.size), ("quality", p.quality), ("n", p.n)) if v is not None}
    made, usage = _media_call(
        ctx, name, "openai", p.model, lambda road, bare: media.openai_images(road, bare, p.prompt, extra)
    )
    if not made:
        raise StepFailed(f"{p.model} answered no image")
    images = _store_media(ctx, name, made)
    return Outcome({"images": images, "model": p.model, "usage": usage}, usage=usage)


RUNNERS: dict[str, Runner] = {
    "litellm_vision": litellm_vision,
    "litellm_image_generation": litellm_image_generation,
    "gemini_image_generator": gemini_image_generator,
    "replicate_text2image": replicate_text2image,
    "replicate_text2video": replicate_text2video,
    "replicate_run": replicate_run,
    "text_echo": text_echo,
    "text_template": text_template,
    "text_concatenate": text_concatenate,
    "text_split": text_split,
    "conditional_branch": conditional_branch,
    "list_emit_await": list_emit_await,
    "extract_from_trajectories": extract_from_trajectories,
    "litellm_chat": litellm_chat,
    "simple_judge": simple_judge,
}
assert set(RUNNERS) == set(ACTIVITIES) - {"runbook"}, "every activity of the catalogue runs"
assert set(RUNNERS) >= LLM_ACTIVITIES


def preflight_workflow(
    task: Any,
    run_params: Mapping[str, Any],
    env: Mapping[str, str],
    upstreams: Upstreams | None = None,
    operator_keys: frozenset[str] = frozenset(),
) -> None:
    """What can be refused before a workflow run is accepted: an init_params
    path that names nothing in the run's init_params, a model step whose
    provider key is not set. InputError (Problems) naming the step and field."""
    from pier.errors import InputError, Problems
    from pier.tasks.paths import parse_path
    from pier.tasks.workflow import MEDIA_PROVIDERS, PATH_SUFFIX

    params = {**task.init_params, **run_params}
    context = {"init_params": params}
    problems: list[InputError] = []
    for name in task.steps:
        config = task.step_config(name)
        for key, value in config.items():
            if not key.endswith(PATH_SUFFIX):
                continue
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str) and parse_path(text).root == "init_params":
                    try:
                        lookup_path(text, context)
                    except PathError as exc:
                        problems.append(
                            InputError(f"step_configs.{name}.{key}: {exc}").at(f"step_configs.{name}.{key}")
                        )
        if config["activity"] in MEDIA_PROVIDERS:
            from pier.lifecycle import media

            fixed = MEDIA_PROVIDERS[config["activity"]]
            try:
                media.choose(
                    fixed, str(config.get("model") or config["activity"]), env, upstreams, operator_keys
                )
            except InputError as exc:
                problems.append(InputError(f"step_configs.{name}: {exc}").at(f"step_configs.{name}.model"))
        if config["activity"] in LLM_ACTIVITIES:
            model = config.get("model")
            path = config.get("model" + PATH_SUFFIX)
            if model is None and isinstance(path, str) and parse_path(path).root == "init_params":
                try:
                    model = lookup_path(path, context)
                except PathError:
                    model = None  # said above
            if isinstance(model, str):
                try:
                    models.choose(model, config.get("model_provider"), env, upstreams, operator_keys)
                except InputError as exc:
                    problems.append(
                        InputError(f"step_configs.{name}: {exc}").at(f"step_configs.{name}.model")
                    )
    Problems.raise_any(problems)


# The fleet's steps (pier.executors.temporal.steps): a Temporal workflow
# decides the order, the branches and the fan-out's children; each call below
# is one of its activities, on whichever worker takes it, with the context
# (init_params and the earlier steps' inputs and outputs, as the record keeps
# them) handed in from the workflow's history and the step's result handed
# back to it. No process owns such a run: its workflow does.


def begin_steps(ctx: RunContext) -> dict[str, Any]:
    """The run starts: its record as the workflow's, running. What the
    workflow needs: the init_params the steps read, each step's activity."""
    record, task = ctx.record, ctx.task
    params = {**task.init_params, **ctx.run_params}
    _as_workflow(record, task, params, ctx)
    record.status, record.started, record.owner = RunStatus.running, record.started or utcnow(), None
    ctx.save_record(record)
    return {
        "init_params": params,
        "steps": [{"name": name, "activity": record.steps[name].activity} for name in task.steps],
    }


def step_result(ctx: RunContext, name: str, outcome: Outcome | None) -> dict[str, Any]:
    """What the workflow keeps of a step that ended: its status, inputs and
    outputs (as the record has them), and where a branch goes on."""
    step = ctx.record.steps[name]
    return {
        "status": step.status.value if step.status else "pending",
        "inputs": step.inputs,
        "outputs": step.outputs.model_dump(mode="json"),
        "error": step.error,
        "next_step": outcome.next_step if outcome else None,
        "skip": outcome.skip if outcome else None,
    }


def run_one_step(ctx: RunContext, name: str, context: dict[str, Any]) -> dict[str, Any]:
    """One step that is not a fan-out, recorded (the run fails with it when it fails)."""
    outcome = _run_step(ctx, name, ctx.record.steps[name], dict(context))
    ctx.save_record(ctx.record)
    return step_result(ctx, name, outcome)


def plan_fan_out(ctx: RunContext, name: str, context: dict[str, Any]) -> dict[str, Any]:
    """A fan-out's start: its parameters read, the step running. The
    children's task and each child's init_params, in item order; or the
    step's result when it failed already (a path that names nothing)."""
    record = ctx.record
    step = record.steps[name]
    _start_step(ctx, name, step)
    try:
        inputs, p = resolve_params(name, record.step_configs[name], context)
        # the workflow plans a fan-out only for a list_emit_await step, whose params these are
        assert isinstance(p, ListEmitAwait)
        step.inputs = ctx.redactor.data(inputs)
        ctx.log(f"inputs: {_brief(step.inputs)}", name)
        task = _child_task(ctx, p)
    except Exception as exc:
        _failed(ctx, name, step, exc)
        step.ended = utcnow()
        step.duration_seconds = round(max(0.0, (step.ended - step.created).total_seconds()), 3)
        ctx.save_record(record)
        return {**step_result(ctx, name, None), "status": "failed"}
    ctx.log(f"fanning {task} out over {len(p.items)} items, {p.max_concurrency} at once", name)
    ctx.save_record(record)
    return {
        "status": "running",
        "task": task,
        "max_concurrency": p.max_concurrency,
        "continue_on_error": p.continue_on_error,
        "inits": [{**p.child_init_params, p.item_param_name: item} for item in p.items],
    }


def note_child(ctx: RunContext, name: str, index: int, trajectory_id: str) -> None:
    """The fan-out started this item's child: the record says so while it runs."""
    step = ctx.record.steps[name]
    started = {
        ref["index"]: ref["trajectory_id"]
        for ref in (step.outputs.model_dump(mode="json").get("started") or [])
        if isinstance(ref, dict)
    }
    started[index] = trajectory_id
    step.outputs = ActivityOutputs(
        started=[{"index": i, "trajectory_id": t} for i, t in sorted(started.items())]
    )
    ctx.save_record(ctx.record)


def gather_fan_out(
    ctx: RunContext, name: str, task: str, children: list[dict[str, Any] | None], continue_on_error: bool,
    context: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """The fan-out's end, once every child has: its outputs from the
    children's records (`children`, in item order: a trajectory id, or why the
    item's child did not start), recorded as the step's."""
    record = ctx.record
    step = record.steps[name]
    began = time.monotonic() - max(0.0, (utcnow() - step.created).total_seconds())

    def body() -> Outcome:
        results: list[Trajectory | None] = []
        errors: list[str | None] = []
        for ref in children:
            child = None
            error = (ref or {}).get("error") or (None if ref else "not started: the run was cancelled")
            if ref and ref.get("trajectory_id"):
                child = ctx.children.get(ref["trajectory_id"]) if ctx.children else None
            if child is not None and child.status != RunStatus.completed:
                error = error or child.error or child.status.value
            results.append(child)
            errors.append(error)
        return _fan_out_outcome(task, results, errors, continue_on_error)

    outcome = _end_step(ctx, name, step, dict(context), body, began)
    ctx.save_record(record)
    return step_result(ctx, name, outcome)


def end_steps(
    ctx: RunContext, skipped: Mapping[str, str | None], cancelled: bool, error: str | None
) -> Trajectory:
    """The run's end: the steps the workflow skipped (and why), then the
    record finished (completed, failed naming its step, or cancelled) and
    stored, run.json with it."""
    record = ctx.record
    for name, why in skipped.items():
        if name in record.steps and record.steps[name].status in (StageStatus.pending, None):
            _skip(ctx, record.steps[name], why)
    if cancelled:
        ctx.cancel.set()
    elif error:
        running = next((n for n, s in record.steps.items() if s.status == StageStatus.running), None)
        record.fail(running or next(iter(record.steps), "run"), error)
    started = record.started or record.created
    _finish(ctx, max(0.0, (utcnow() - started).total_seconds()))
    return record
