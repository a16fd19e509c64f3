"""Tasks: stored workflows of a collection. PUT takes pier's task JSON or a
runbook; the platform client's bodies (`{name, description, workflow}` on
POST, `{workflow, description}` on PUT) are taken too."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from pier.api.auth import CollectionDep
from pier.api.errors import ApiError
from pier.api.forms import invalid, refuse_nul
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.schemas.tasks import TaskCreate, TaskDeleted, TaskPublic, TaskUpdate
from pier.api.state import StateDep
from pier.db import StoredTask
from pier.errors import NotFoundError
from pier.lifecycle.plan import task_from_json, task_from_text
from pier.names import check_task_name
from pier.settings import Settings
from pier.tasks.model import Task, unknown_activity

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"], responses=ERROR_RESPONSES)

TASK_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"anyOf": [Task.model_json_schema(), TaskUpdate.model_json_schema()]}
            },
            "text/markdown": {"schema": {"type": "string", "description": "a RUNBOOK.md"}},
        },
    }
}
CLIENT_KEYS = frozenset(TaskUpdate.model_fields)


def _public(stored: StoredTask) -> TaskPublic:
    return TaskPublic(
        collection=stored.collection,
        name=stored.name,
        description=stored.description,
        workflow=Task.model_validate(stored.definition),
        created_at=stored.created_at,
        updated_at=stored.updated_at,
    )


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
        raise RequestValidationError(
            [{**e, "loc": (*prefix, *e.get("loc", ()))} for e in exc.errors()]
        ) from None


async def _json_or_text(request: Request) -> dict[str, Any] | str:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await request.body()
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise invalid("body", "is not UTF-8 text") from None
    if content_type in ("text/markdown", "text/plain", "text/x-markdown"):
        return text
    if content_type not in ("", "application/json"):
        raise ApiError(415, f"unsupported content type {content_type!r}: send a task as application/json "
                            "or a runbook as text/markdown")  # fmt: skip
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise invalid("body", f"is not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(data, dict):
        raise invalid("body", "must be a JSON object: a task, or {workflow, description}")
    return data


def _update(data: dict[str, Any]) -> TaskUpdate | None:
    """The client's {workflow, description} body, or None for a task JSON."""
    if not data or not set(data) <= CLIENT_KEYS:
        return None
    try:
        return TaskUpdate.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


@router.post("/{collection}", status_code=status.HTTP_201_CREATED, summary="Create a task")
async def create_task(collection: CollectionDep, body: TaskCreate, state: StateDep) -> TaskPublic:
    """`workflow` is a task JSON or a runbook's text; 409 when the name is taken."""
    name = check_task_name(body.name)
    definition = workflow_task(body.workflow, name, state.settings)
    try:
        await run_in_threadpool(state.store.get_task, collection, name)
    except NotFoundError:
        stored = await run_in_threadpool(
            state.store.put_task, collection, name, definition.model_dump(mode="json"), body.description
        )
        return _public(stored)
    raise ApiError(
        409, f"task {name!r} exists in {collection!r}: update it with PUT /api/v1/tasks/{collection}/{name}"
    )


@router.put("/{collection}/{task}", openapi_extra=TASK_BODY, summary="Create, replace or update a task")
async def put_task(collection: CollectionDep, task: str, request: Request, state: StateDep) -> TaskPublic:
    """A task JSON ({init_params, steps, step_configs}) or a runbook's text
    (text/markdown) creates or replaces the task; `{workflow, description}`
    changes what it names and keeps the rest. Checked before it is stored."""
    name = check_task_name(task)
    data = await _json_or_text(request)
    update = _update(data) if isinstance(data, dict) else None
    if update is None:
        definition = workflow_task(data, name, state.settings, field="")
        stored = await run_in_threadpool(
            state.store.put_task, collection, name, definition.model_dump(mode="json")
        )
        return _public(stored)
    if update.workflow is None:
        current = await run_in_threadpool(state.store.get_task, collection, name)
        definition = Task.model_validate(current.definition)
    else:
        definition = workflow_task(update.workflow, name, state.settings)
    stored = await run_in_threadpool(
        state.store.put_task, collection, name, definition.model_dump(mode="json"), update.description
    )
    return _public(stored)


@router.get("/{collection}/{task}", summary="A task")
def get_task(collection: CollectionDep, task: str, state: StateDep) -> TaskPublic:
    return _public(state.store.get_task(collection, task))


@router.delete("/{collection}/{task}", summary="Delete a task (its runs stay)")
def delete_task(collection: CollectionDep, task: str, state: StateDep) -> TaskDeleted:
    state.store.delete_task(collection, task)
    return TaskDeleted(collection=collection, name=task)


@router.get("/{collection}", summary="The collection's tasks")
def list_tasks(collection: CollectionDep, state: StateDep) -> list[TaskPublic]:
    return [_public(t) for t in state.store.list_tasks(collection)]
