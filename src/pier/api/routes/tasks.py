"""Tasks: stored workflows of a collection."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from pier.api.auth import CollectionDep
from pier.api.errors import ApiError
from pier.api.forms import invalid, refuse_nul
from pier.api.schemas.common import ERROR_RESPONSES
from pier.api.schemas.tasks import TaskList, TaskPublic
from pier.api.state import get_state
from pier.store import StoredTask
from pier.tasks.model import Task
from pier.tasks.validate import task_from_json, task_from_text, task_name

router = APIRouter(prefix="/api/v1/tasks", tags=["tasks"], responses=ERROR_RESPONSES)

TASK_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": Task.model_json_schema()},
            "text/markdown": {"schema": {"type": "string", "description": "a RUNBOOK.md"}},
        },
    }
}


def _public(stored: StoredTask) -> TaskPublic:
    return TaskPublic(
        collection=stored.collection,
        name=stored.name,
        task=Task.model_validate(stored.definition),
        created_at=stored.created_at,
        updated_at=stored.updated_at,
    )


async def _task_from_body(request: Request, name: str) -> Task:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await request.body()
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise invalid("body", "is not UTF-8 text") from None
    if content_type in ("text/markdown", "text/plain", "text/x-markdown"):
        refuse_nul(text)
        return task_from_text(text, name)
    if content_type not in ("", "application/json"):
        raise ApiError(415, f"unsupported content type {content_type!r}: send a task as application/json "
                            "or a runbook as text/markdown")  # fmt: skip
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise invalid("body", f"is not valid JSON ({exc.msg} at character {exc.pos})") from None
    refuse_nul(data)
    try:
        return task_from_json(data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


@router.put("/{collection}/{task}", openapi_extra=TASK_BODY, summary="Create or replace a task")
async def put_task(collection: CollectionDep, task: str, request: Request) -> TaskPublic:
    """A task JSON ({init_params, steps, step_configs}) or a runbook's text
    (text/markdown), checked before it is stored."""
    state = get_state(request)
    name = task_name(task)
    definition = await _task_from_body(request, name)
    stored = await run_in_threadpool(
        state.store.put_task, collection, name, definition.model_dump(mode="json")
    )
    return _public(stored)


@router.get("/{collection}/{task}", summary="A task")
def get_task(collection: CollectionDep, task: str, request: Request) -> TaskPublic:
    return _public(get_state(request).store.get_task(collection, task))


@router.get("/{collection}", summary="The collection's task names")
def list_tasks(collection: CollectionDep, request: Request) -> TaskList:
    return TaskList(tasks=[t.name for t in get_state(request).store.list_tasks(collection)])
