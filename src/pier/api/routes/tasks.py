"""Tasks: stored workflows of a collection. PUT takes pier's task JSON or a
runbook; the platform client's bodies (`{name, description, workflow}` on
POST, `{workflow, description}` on PUT) are taken too."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, status
from starlette.concurrency import run_in_threadpool

from pier.api.auth import CollectionDep
from pier.api.errors import ApiError
from pier.api.schemas.common import ERROR_RESPONSES, inline_schema
from pier.api.schemas.tasks import TaskCreate, TaskDeleted, TaskPublic, TaskUpdate
from pier.api.state import StateDep
from pier.db import StoredTask
from pier.names import check_task_name
from pier.server.errors import invalid
from pier.server.services import tasks as service
from pier.tasks.model import Task

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"], responses=ERROR_RESPONSES)

TASK_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"anyOf": [inline_schema(Task), inline_schema(TaskUpdate)]}},
            "text/markdown": {"schema": {"type": "string", "description": "a RUNBOOK.md"}},
        },
    }
}


def _public(stored: StoredTask) -> TaskPublic:
    return TaskPublic(
        collection=stored.collection,
        name=stored.name,
        description=stored.description,
        workflow=service.definition(stored),
        created_at=stored.created_at,
        updated_at=stored.updated_at,
    )


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


@router.post("/{collection}", status_code=status.HTTP_201_CREATED, summary="Create a task")
async def create_task(collection: CollectionDep, body: TaskCreate, state: StateDep) -> TaskPublic:
    """`workflow` is a task JSON or a runbook's text; 409 when the name is taken."""
    stored = await run_in_threadpool(
        service.create, state, collection, body.name, body.workflow, body.description
    )
    return _public(stored)


@router.put("/{collection}/{task}", openapi_extra=TASK_BODY, summary="Create, replace or update a task")
async def put_task(collection: CollectionDep, task: str, request: Request, state: StateDep) -> TaskPublic:
    """A task JSON ({init_params, steps, step_configs}) or a runbook's text
    (text/markdown) creates or replaces the task; `{workflow, description}`
    changes what it names and keeps the rest. Checked before it is stored."""
    name = check_task_name(task)  # before the body is read
    data = await _json_or_text(request)
    return _public(await run_in_threadpool(service.put, state, collection, name, data))


@router.get("/{collection}/{task}", summary="A task")
def get_task(collection: CollectionDep, task: str, state: StateDep) -> TaskPublic:
    return _public(service.get(state, collection, task))


@router.delete("/{collection}/{task}", summary="Delete a task (its runs stay)")
def delete_task(collection: CollectionDep, task: str, state: StateDep) -> TaskDeleted:
    service.delete(state, collection, task)
    return TaskDeleted(collection=collection, name=task)


@router.get("/{collection}", summary="The collection's tasks")
def list_tasks(collection: CollectionDep, state: StateDep) -> list[TaskPublic]:
    return [_public(t) for t in service.of_collection(state, collection)]
