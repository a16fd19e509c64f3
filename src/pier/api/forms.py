"""A run's body, JSON or multipart, into an accepted run.

Both forms go through RunCreate, so a bad field gets the same 422 either way.
Multipart `files` are stored as an upload and added to init_params.file_paths;
when the run is refused they are removed again.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from pier.api.dispatcher import RunParams
from pier.api.errors import ApiError
from pier.api.limits import json_depth, too_deep, unstorable_field
from pier.api.schemas.runs import RunCreate
from pier.api.state import ApiState
from pier.lifecycle.files import save_uploads
from pier.record import Trajectory
from pier.storage.base import upload_prefix

MAX_FILES = 1000
MAX_KEY = 255  # the store's column
JSON_FIELDS = ("init_params", "secret_params")
Body = tuple[dict[str, Any], list[UploadFile]]


def invalid(field: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": (field,), "msg": message, "type": "value_error"}])


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


def refuse_nul(value: Any, field: str = "body") -> None:
    """Multipart fields and parsed bodies meet the rule JSON bodies meet at the edge."""
    found = unstorable_field(value, field)
    if found:
        raise invalid(found, "must not contain a NUL character or an unpaired surrogate")


def _validated(fields: dict[str, Any]) -> RunCreate:
    refuse_nul(fields)
    try:
        return RunCreate.model_validate(fields)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from None


def _params(body: RunCreate, uploaded: list[str], key: str | None = None) -> RunParams:
    init = dict(body.init_params)
    if uploaded:
        given = init.get("file_paths") or []
        if not isinstance(given, list):
            raise invalid("init_params.file_paths", "must be a list of file paths")
        init["file_paths"] = [*given, *uploaded]
    return RunParams(
        init,
        dict(body.secret_params),
        body.webhook_url,
        body.webhook_secret,
        use_trial_keys=body.use_trial_keys,
        subscription_credential=body.subscription_credential,
        idempotency_key=key,
    )


async def accept_run(
    request: Request, state: ApiState, collection: str, task: str, key: str | None = None
) -> Trajectory:
    fields, files = await read_run_body(request)
    return await accept_fields(state, collection, task, fields, files, key)


def _key(key: str | None) -> str | None:
    if key is None:
        return None
    if not key.strip() or len(key) > MAX_KEY or not key.isprintable():
        raise ApiError(422, f"the Idempotency-Key header must be 1 to {MAX_KEY} printable characters")
    return key


async def accept_fields(
    state: ApiState,
    collection: str,
    task: str,
    fields: dict[str, Any],
    files: list[UploadFile],
    key: str | None = None,
) -> Trajectory:
    """A run from a body already read (the API's, or the web UI's form): the
    same checks and 422s either way."""
    body = _validated(fields)
    return await run_in_threadpool(_accept, state, collection, task, body, files, _key(key))


def _accept(
    state: ApiState, collection: str, task: str, body: RunCreate, files: list[UploadFile], key: str | None
) -> Trajectory:
    """In a worker thread: the store and file copies block."""
    if key is not None:  # a retry: its files were stored the first time
        earlier = state.dispatcher.keyed_run(collection, key)
        if earlier is not None:
            return earlier
    if not files:
        return state.dispatcher.accept(collection, task, _params(body, [], key))
    state.store.get_task(collection, task)  # 404 before any file is stored
    state.quotas.check_new_run(collection)  # 429 before any file is stored
    state.quotas.check_upload(collection, sum(f.size or 0 for f in files))
    streams = [(f.filename, f.file) for f in files]
    upload_id, paths = save_uploads(state.storage, collection, streams, state.settings.scratch_root)
    state.quotas.uploaded(collection)
    try:
        return state.dispatcher.accept(collection, task, _params(body, paths, key))
    except BaseException:
        state.storage.delete(upload_prefix(collection, upload_id))
        raise
