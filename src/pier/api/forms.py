"""A run's body, JSON or multipart, read into fields and files for the runs
service (pier.server.services.runs.accept), which checks both forms through
RunCreate, so a bad field gets the same 422 either way.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from pier.api.errors import ApiError
from pier.api.limits import json_depth, too_deep
from pier.record import Trajectory
from pier.server.errors import invalid
from pier.server.services import runs
from pier.server.services.runs import MAX_FILES
from pier.server.state import ApiState
from pier.telemetry.audit import note

JSON_FIELDS = ("init_params", "secret_params")
Body = tuple[dict[str, Any], list[UploadFile]]


async def read_run_body(request: Request) -> Body:
    """(fields, files) of a JSON or multipart body; 422 / 415 when unreadable."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in ("", "application/json"):
        return _json_object(await request.body()), []
    if content_type in ("multipart/form-data", "application/x-www-form-urlencoded"):
        return await _form(request)
    raise ApiError(
        415, f"unsupported content type {content_type!r}: send application/json or multipart/form-data"
    )


def _json_object(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise invalid("body", f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise invalid("body", 'must be a JSON object such as {"init_params": {...}}')
    return data


async def _form(request: Request) -> Body:
    depth = request.app.state.pier.settings.max_json_depth
    form = await request.form(max_files=MAX_FILES)
    fields: dict[str, Any] = {}
    files: list[UploadFile] = []
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            if key != "files":
                raise invalid(key, "only the `files` field may hold files")
            files.append(value)
        elif key in JSON_FIELDS:
            fields[key] = _json_field(key, value, depth)
        else:
            fields[key] = value
    return fields, files


def _json_field(name: str, text: str, max_depth: int) -> Any:
    """A multipart field's JSON, under the depth limit JSON bodies meet at the edge."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep(max_depth) from None
    except json.JSONDecodeError as exc:
        raise invalid(name, f"is not valid JSON ({exc.msg} at character {exc.pos})") from None
    if json_depth(value) > max_depth:
        raise too_deep(max_depth)
    return value


async def accept_run(
    request: Request, state: ApiState, collection: str, task: str, key: str | None = None
) -> Trajectory:
    """The request's run, accepted by the runs service (in a worker thread: the
    store and file copies block)."""
    fields, files = await read_run_body(request)
    record = await run_in_threadpool(runs.accept, state, collection, task, fields, files, key)
    note(request, object_id=record.trajectory_id)  # the audit entry names the run it made
    return record
