"""Tasks: a collection's stored workflows, made from pier's task JSON, a
runbook's text, or the platform client's `{workflow, description}`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from pier.db import StoredTask
from pier.errors import NotFoundError
from pier.lifecycle.plan import task_from_json, task_from_text
from pier.names import check_task_name
from pier.record import Trajectory
from pier.server.auth import Caller
from pier.server.errors import ServiceError, invalid, invalid_fields
from pier.server.models import TaskStats, TaskUpdate
from pier.server.services import collections
from pier.server.services.inputs import refuse_nul
from pier.server.services.stats import task_stats
from pier.server.state import ApiState
from pier.settings import Settings
from pier.tasks.model import Task, unknown_activity
from pier.tasks.workflow import WorkflowProblems

CLIENT_KEYS = frozenset(TaskUpdate.model_fields)
RATE_RUNS = 50  # a task's summary: its success rate of the latest this many runs


def workflow_task(
    workflow: dict[str, Any] | str, name: str, settings: Settings, field: str = "workflow"
) -> Task:
    """A task from a runbook's text or a workflow JSON; 422 naming the field."""
    if isinstance(workflow, str):
        refuse_nul(workflow, field or "body")
        return task_from_text(workflow, settings, name)
    refuse_nul(workflow, field or "body")
    unknown = unknown_activity(workflow)
    if unknown:
        raise invalid(f"{field}.{unknown[0]}" if field else unknown[0], unknown[1])
    try:
        return task_from_json(workflow, settings)
    except ValidationError as exc:
        prefix = (field,) if field else ()
        raise invalid_fields([{**e, "loc": (*prefix, *loc)} for e, loc in _task_errors(exc)]) from None


_STEP_KINDS = ("runbook", "activity")  # pier.tasks.model.AnyStep's tags: not a field the client wrote


def _task_errors(exc: ValidationError) -> list[tuple[Mapping[str, Any], tuple[Any, ...]]]:
    """(error, the field it names as the client wrote it): a workflow's
    problems one by one, and a step's fields without the union's tag."""
    out: list[tuple[Mapping[str, Any], tuple[Any, ...]]] = []
    for error in exc.errors():
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, WorkflowProblems):
            out += [
                ({"msg": p.message, "type": "value_error"}, tuple(p.field.split("."))) for p in cause.problems
            ]
            continue
        loc = tuple(error.get("loc", ()))
        if len(loc) > 2 and loc[0] == "step_configs" and loc[2] in _STEP_KINDS:
            loc = loc[:2] + loc[3:]
        out.append((error, loc))
    return out


def create(
    state: ApiState, collection: str, name: str, workflow: dict[str, Any] | str, description: str | None
) -> StoredTask:
    """A new task; 409 when the collection has one of that name."""
    name = check_task_name(name)
    definition = workflow_task(workflow, name, state.settings)
    try:
        state.store.get_task(collection, name)
    except NotFoundError:
        return state.store.put_task(collection, name, definition.model_dump(mode="json"), description)
    raise ServiceError(
        409, f"task {name!r} exists in {collection!r}: update it with PUT /api/v1/tasks/{collection}/{name}"
    )


def client_update(data: dict[str, Any]) -> TaskUpdate | None:
    """The client's {workflow, description} body, or None for a task JSON."""
    if not data or not set(data) <= CLIENT_KEYS:
        return None
    try:
        return TaskUpdate.model_validate(data)
    except ValidationError as exc:
        raise invalid_fields(exc.errors()) from None


def put(state: ApiState, collection: str, name: str, data: dict[str, Any] | str) -> StoredTask:
    """A task JSON or a runbook's text creates or replaces the task;
    `{workflow, description}` changes what it names and keeps the rest."""
    name = check_task_name(name)
    update = client_update(data) if isinstance(data, dict) else None
    if update is None:
        definition = workflow_task(data, name, state.settings, field="")
        return state.store.put_task(collection, name, definition.model_dump(mode="json"))
    if update.workflow is None:
        definition = Task.model_validate(state.store.get_task(collection, name).definition)
    else:
        definition = workflow_task(update.workflow, name, state.settings)
    return state.store.put_task(collection, name, definition.model_dump(mode="json"), update.description)


def get(state: ApiState, collection: str, task: str) -> StoredTask:
    return state.store.get_task(collection, task)


def definition(stored: StoredTask) -> Task:
    return Task.model_validate(stored.definition)


def delete(state: ApiState, collection: str, task: str) -> None:
    state.store.delete_task(collection, task)


def of_collection(state: ApiState, collection: str) -> list[StoredTask]:
    return state.store.list_tasks(collection)


@dataclass(frozen=True)
class TaskSummary:
    """A task as a list shows it: what it runs, its last run, its success rate."""

    collection: str
    name: str
    description: str | None
    agent: Any
    model: Any
    last: Trajectory | None  # its newest run
    rate: float | None  # success rate of its ended runs among the latest RATE_RUNS
    ended: int  # how many of those have ended


def summaries(state: ApiState, caller: Caller) -> list[TaskSummary]:
    """Every task of the collections this caller may see, in their order."""
    return [
        summary(state, t) for c in collections.visible(state, caller) for t in of_collection(state, c.name)
    ]


def summary(state: ApiState, stored: StoredTask) -> TaskSummary:
    params = stored.definition.get("init_params") or {}
    runs, _ = state.store.list_runs(stored.collection, stored.name, limit=RATE_RUNS)
    stats = task_stats(stored.collection, stored.name, runs)
    return TaskSummary(
        collection=stored.collection,
        name=stored.name,
        description=stored.description,
        agent=params.get("agent"),
        model=params.get("model"),
        last=runs[0] if runs else None,
        rate=stats.success_rate,
        ended=sum(1 for r in runs if r.status.terminal),
    )


@dataclass(frozen=True)
class TaskRuns:
    """A task's latest runs with their figures, or a stored task without runs."""

    collection: str
    task: str
    stored: bool  # a stored task (else only its runs remain)
    runs: list[Trajectory]  # newest first
    stats: TaskStats | None  # None when it has no runs


def with_runs(state: ApiState, collection: str, limit: int) -> list[TaskRuns]:
    """Per task with runs among the collection's latest `limit`, by name; then
    the stored tasks that have none yet."""
    records, _ = state.store.list_runs(collection, limit=limit)
    by_task: dict[str, list[Trajectory]] = {}
    for record in records:
        by_task.setdefault(record.name, []).append(record)
    stored = {t.name for t in of_collection(state, collection)}
    found = [TaskRuns(collection, task, task in stored, runs, task_stats(collection, task, runs))
             for task, runs in sorted(by_task.items())]  # fmt: skip
    return found + [TaskRuns(collection, task, True, [], None) for task in sorted(stored - set(by_task))]
