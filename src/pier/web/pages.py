"""The web UI's pages: forms and HTML over the service layer the API's routes
use too (pier.server.services), so a page shows and does exactly what the API
would for the same token."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Query, Request
from fastapi import Path as FastPath
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from pier.errors import InputError, NotFoundError, SandboxError
from pier.record import RunStatus, Trajectory
from pier.server.auth import Caller, caller_for_token, collection_access, require_admin
from pier.server.errors import Invalid, ServiceError, invalid
from pier.server.services import again, audit, collections, runs, tasks, volumes
from pier.server.services.runs import MAX_FILES
from pier.server.services.stats import run_cost
from pier.server.state import ApiState
from pier.telemetry.audit import note
from pier.web import charts, views
from pier.web.render import page
from pier.web.session import CsrfRejected, FormCaller, PageCaller, StateDep, clear_session, set_session

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
LOG_LINES = 5000
OVERVIEW_RUNS = 5000
PART_HEADER = "x-pier-part"  # the live parts of a page, fetched by pier.js
MAX_TOKEN_ID = 2**31 - 1  # token ids are 32-bit integers in the store


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def _safe_next(url: str | None) -> str:
    """Only a path of this site: never send a signed-in browser elsewhere."""
    if not url or not url.startswith("/") or url.startswith("//") or "\\" in url:
        return "/runs"
    return url


@router.get("/")
def home() -> RedirectResponse:
    return RedirectResponse("/runs", status_code=307)


@router.get("/signin")
def signin_page(request: Request, next: str | None = None) -> HTMLResponse:
    return page(request, "signin.html", {"next": _safe_next(next), "error": None})


@router.post("/signin")
async def signin(request: Request, state: StateDep) -> Response:
    """Sign in; a form sent from another site (its Origin says so) is refused,
    so no page elsewhere can sign a browser in to a token of its choosing."""
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.headers.get("host"):
        raise CsrfRejected()
    form = await request.form()
    token = str(form.get("token") or "").strip()
    next_url = _safe_next(str(form.get("next") or ""))
    caller = await caller_for_token(state, token) if token else None
    if caller is None:
        error = "That token is not valid here: use a collection's token or the admin token."
        return page(request, "signin.html", {"next": next_url, "error": error}, status_code=401)
    response = _see_other(next_url)
    set_session(request, response, token, state.settings.web_behind_tls)
    return response


@router.post("/signout")
def signout(_caller: FormCaller) -> RedirectResponse:
    response = _see_other("/signin")
    clear_session(response)
    return response


# runs


def _day(value: str | None, field: str) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.combine(date.fromisoformat(value), time(), tzinfo=UTC)
    except ValueError:
        raise invalid(field, f"{value!r} is not a date: write YYYY-MM-DD") from None


def _status(value: str) -> RunStatus:
    try:
        return RunStatus(value)
    except ValueError:
        known = ", ".join(s.value for s in RunStatus)
        raise invalid("status", f"{value!r} is not a run status: use one of {known}") from None


def _stored_collections(state: ApiState, caller: Caller) -> list[str]:
    return [c.name for c in collections.visible(state, caller)]


@router.get("/runs")
def runs_page(
    request: Request,
    state: StateDep,
    caller: PageCaller,
    collection: str | None = None,
    task: str | None = None,
    status: Annotated[list[str], Query()] = [],  # noqa: B006
    success: str | None = None,
    label: str | None = None,
    since: str | None = None,
    until: str | None = None,
    page_no: Annotated[int, Query(alias="page", ge=1, le=1_000_000)] = 1,
) -> HTMLResponse:
    filters = {"collection": collection or None, "task": task or None, "label": label or None,
               "success": success or None, "since": since or None, "until": until or None}  # fmt: skip
    statuses = [_status(s) for s in status if s]
    until_day = _day(until, "until")
    found, total = runs.find(
        state,
        caller,
        collection=filters["collection"],
        task=filters["task"],
        statuses=statuses,
        success={"yes": True, "no": False}.get(success or ""),
        labels=[label] if label else [],
        since=_day(since, "since"),
        until=until_day + timedelta(days=1) if until_day else None,
        limit=PAGE_SIZE,
        page=page_no,
    )
    query = {k: v for k, v in filters.items() if v} | ({"status": statuses[0].value} if statuses else {})
    context = {
        "runs": [_row(r) for r in found],
        "total": total,
        "page_no": page_no,
        "pages": max(1, math.ceil(total / PAGE_SIZE)),
        "filters": filters,
        "status": statuses[0].value if statuses else "",
        "statuses": [s.value for s in RunStatus],
        "collections": collections.names(state, caller),
        "page_url": lambda n: "/runs?" + urlencode({**query, "page": n}),
    }
    if request.headers.get(PART_HEADER) == "rows":
        response = page(request, "_runs_rows.html", context)
        response.headers["X-Pier-Total"] = str(total)
        return response
    return page(request, "runs.html", context)


def _row(record: Trajectory) -> dict[str, Any]:
    inputs = record.run.inputs
    return {
        "record": record,
        "agent": record.outputs.agent or inputs.get("agent") or "—",
        "model": record.outputs.model or inputs.get("model") or "",
        "cost": run_cost(record),
        "started": record.started or record.created,
    }


@router.get("/runs/{trajectory_id}")
def run_page(request: Request, state: StateDep, caller: PageCaller, trajectory_id: str) -> HTMLResponse:
    record = runs.visible(state, caller, trajectory_id)
    ended = record.status.terminal
    files = views.ordered_files(record)
    primary = set(record.outputs.primary_files)
    context = {
        "run": record,
        "row": _row(record),
        "failed": record.failed_stage,
        "files": [(f, f.path in primary) for f in files],
        "previews": {
            f.path: views.preview(state.storage, record.collection, f) for f in files if f.path in primary
        },
        "transcript": views.transcript(state.storage, record) if ended else [],
        "inputs": views.shown_inputs(record),
        "instruction": record.run.inputs.get("instruction") or "",
        "trace_url": runs.trace_url(state, record),
        "sandbox_refusal": getattr(request.state, "sandbox_refusal", None),  # set by a refused form below
        "sandbox_open": (sandbox_open := _sandbox_open(record)),
        "continue_tasks": _continue_tasks(state, record) if sandbox_open else [],
    }
    part = request.headers.get(PART_HEADER)
    if part == "live":
        return page(request, "_run_live.html", context)
    if part == "stages":
        return page(request, "_run_stages.html", context)
    events = runs.lines(state, trajectory_id, 0, LOG_LINES)
    context |= {"log": events, "last_seq": events[-1].seq if events else 0}
    return page(request, "run.html", context)


def _sandbox_open(record: Trajectory) -> bool:
    """The run ended and its sandbox is kept with nothing at it: the page offers
    pause, resume, snapshot and continue."""
    kept = record.outputs.sandbox
    return bool(record.status.terminal and kept.kept_until and not kept.continued_by)


def _continue_tasks(state: ApiState, record: Trajectory) -> list[str]:
    """The tasks of the run's collection a run may continue in its kept
    sandbox with (runbooks, not workflows)."""
    found = tasks.of_collection(state, record.collection)
    return [t.name for t in found if not tasks.definition(t).is_workflow]


@router.get("/runs/{trajectory_id}/files/{path:path}")
def file_page(
    request: Request, state: StateDep, caller: PageCaller, trajectory_id: str, path: str
) -> HTMLResponse:
    """One result file shown inline (the raw bytes are at its download link)."""
    record = runs.visible(state, caller, trajectory_id)
    found = [f for f in record.outputs.results_files if f.path == path]
    if not found:
        raise NotFoundError(f"run {trajectory_id} has no result file {path!r}: see its files")
    preview = views.preview(state.storage, record.collection, found[0])
    return page(request, "file.html", {"run": record, "file": found[0], "preview": preview})


@router.post("/runs/{trajectory_id}/labels")
async def add_label(
    request: Request, state: StateDep, caller: FormCaller, trajectory_id: str
) -> RedirectResponse:
    form = await request.form()
    record = runs.visible(state, caller, trajectory_id)
    key, value = str(form.get("key") or ""), str(form.get("value") or "")
    await run_in_threadpool(runs.add_label, state, record.collection, record.name, trajectory_id, key, value)
    return _see_other(f"/runs/{trajectory_id}#labels")


@router.post("/runs/{trajectory_id}/cancel")
async def cancel(
    request: Request, state: StateDep, caller: FormCaller, trajectory_id: str
) -> RedirectResponse:
    record = runs.visible(state, caller, trajectory_id)
    await run_in_threadpool(runs.cancel, state, record.collection, record.name, [trajectory_id])
    return _see_other(f"/runs/{trajectory_id}")


# a run's kept sandbox (docs/sessions.md): pause, resume, save as a snapshot

SANDBOX_DONE = {"pause": "paused", "resume": "resumed", "snapshot": "saved"}  # ?sandbox= after it


@router.post("/runs/{trajectory_id}/sandbox/{action}")
async def kept_sandbox(
    request: Request,
    state: StateDep,
    caller: FormCaller,
    trajectory_id: str,
    action: Annotated[str, FastPath(pattern="^(pause|resume|snapshot)$")],
) -> Response:
    """Pause, resume or save as a snapshot the run's kept sandbox, as the API's
    routes do (the same services); a refusal is shown on the run's page."""
    form = await request.form()
    record = runs.visible(state, caller, trajectory_id)  # only a viewer who may use its collection
    try:
        if action == "snapshot":
            name = str(form.get("name") or "").strip()
            await run_in_threadpool(runs.save_snapshot, state, record.collection, trajectory_id, name)
        else:
            pause = action == "pause"
            await run_in_threadpool(runs.pause_sandbox, state, record.collection, trajectory_id, pause)
    except (ServiceError, InputError) as exc:
        if isinstance(exc, NotFoundError):
            raise
        said = exc.detail if isinstance(exc, ServiceError) else str(exc)
        return await _refused_on_run_page(request, state, caller, trajectory_id, exc, said)
    return _see_other(f"/runs/{trajectory_id}?sandbox={SANDBOX_DONE[action]}#sandbox")


async def _refused_on_run_page(
    request: Request, state: ApiState, caller: Caller, trajectory_id: str, exc: Exception, said: str
) -> Response:
    """The run's page again, saying why a form about its kept sandbox was
    refused, with the refusal's status (a service's, else 422)."""
    request.state.sandbox_refusal = said
    response = await run_in_threadpool(run_page, request, state, caller, trajectory_id)
    response.status_code = exc.status if isinstance(exc, ServiceError) else 422
    return response


@router.post("/runs/{trajectory_id}/continue")
async def continue_run(request: Request, state: StateDep, caller: FormCaller, trajectory_id: str) -> Response:
    """A new run of a task of the run's collection in its kept sandbox
    (init_params.continue_from, and keep_sandbox when checked), through the
    service that checks the claim's rules first (pier.server.services.runs.
    continue_in, then what the API's POST /run does); a refusal (another
    collection's run, not kept, expired, in use; the plan's rules) is shown on
    the kept run's page in the same words."""
    form = await request.form()
    record = runs.visible(state, caller, trajectory_id)  # only a viewer who may use its collection
    collection = str(form.get("collection") or record.collection)
    await collection_access(collection, state, caller)
    task = str(form.get("task") or "")
    keep = str(form.get(again.KEEP) or "")
    init = again.run_fields({}, {again.KEEP: keep})  # the task's own variables and settings
    try:
        started = await run_in_threadpool(runs.continue_in, state, collection, task, trajectory_id, init)
    except (ServiceError, InputError) as exc:
        return await _refused_on_run_page(request, state, caller, trajectory_id, exc, _refusal(exc))
    note(request, object_id=started.trajectory_id)
    return _see_other(f"/runs/{started.trajectory_id}")


# tasks


@router.get("/tasks")
def tasks_page(request: Request, state: StateDep, caller: PageCaller) -> HTMLResponse:
    return page(request, "tasks.html", {"tasks": tasks.summaries(state, caller)})


@router.get("/tasks/{collection}/{task}")
async def task_page(
    request: Request,
    state: StateDep,
    caller: PageCaller,
    collection: str,
    task: str,
    rerun: str | None = None,
) -> Response:
    if rerun:  # the old "run again" link: the run's own form, which works for any run
        return _see_other(f"/runs/{rerun}/again")
    await collection_access(collection, state, caller)
    stored = tasks.get(state, collection, task)
    definition = tasks.definition(stored)
    return page(request, "task.html", _form_context(stored, definition, None, {}, {}))


def _form_context(
    stored: Any,
    definition: Any,
    source: again.Again | None,
    values: dict[str, str],
    settings: dict[str, str],
    error: str | None = None,
) -> dict[str, Any]:
    """The run form: each variable the runbook declares (a required one empty
    and marked, a default shown as the default, never as a value typed in),
    the image, snapshot and model (the task's own shown as such), the files."""
    init = definition.init_params
    declared = dict(init.get("vars") or {})
    names = list(dict.fromkeys([*declared, *values]))
    variables = [
        {
            "name": name,
            "value": values.get(name, ""),
            "required": name in declared and declared[name] is None,
            "default": None if declared.get(name) is None else _shown(declared[name]),
        }
        for name in names
    ]
    fields = [
        {
            "name": name,
            "value": settings.get(name, ""),
            "default": _shown(init.get(name)) if init.get(name) else None,
        }
        for name in again.TEXT_FIELDS
    ]
    task_keeps = init.get(again.KEEP) is True
    keep = settings.get(again.KEEP, "")
    keep_field = {  # checked as the run (or the form sent) had it, else as the task has it
        "checked": keep == "true" or (keep == "" and task_keeps),
        "task_keeps": task_keeps,  # then unchecked sends "false": the task's own is not the run's
    }
    return {
        "task": stored,
        "collection": source.source.collection if source else stored.collection,
        "task_name": source.source.task if source else stored.name,
        "instruction": init.get("instruction") or "",
        "params": {k: v for k, v in init.items() if k not in ("instruction", "vars")},
        "variables": variables,
        "fields": fields,
        "keep": keep_field,
        "source": source,
        "action": f"/runs/{source.source.trajectory_id}/again"
        if source
        else f"/tasks/{stored.collection}/{stored.name}/run",
        "error": error,
    }


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else views.pretty(value)


def _form_values(form: Any) -> tuple[dict[str, str], dict[str, str], list[UploadFile]]:
    items = form.multi_items()
    variables = {k[4:]: v for k, v in items if k.startswith("var.") and isinstance(v, str)}
    settings = {k: v for k, v in items if k in again.FORM_FIELDS and isinstance(v, str)}
    files = [v for k, v in items if k == "files" and isinstance(v, UploadFile) and v.filename]
    return variables, settings, files


def _refusal(exc: Exception) -> str:
    if isinstance(exc, Invalid):
        return "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()
        )
    return str(exc)


@router.post("/tasks/{collection}/{task}/run")
async def start_run(
    request: Request, state: StateDep, caller: FormCaller, collection: str, task: str
) -> Response:
    """The form's `var.NAME` fields become init_params.vars (only those filled
    in), its image, snapshot and model fields the run's own (when filled in),
    its keep_sandbox checkbox init_params.keep_sandbox, and its files are attached as the API's multipart `files` would be. A
    refusal (the rules of the plan, the CLI's and the API's) shows the form
    again, with what was typed and what to fix."""
    await collection_access(collection, state, caller)
    form = await request.form(max_files=MAX_FILES)
    variables, settings, files = _form_values(form)
    fields: dict[str, Any] = {"init_params": again.run_fields(variables, settings)}
    try:
        record = await run_in_threadpool(runs.accept, state, collection, task, fields, files)
    except (Invalid, InputError) as exc:
        if isinstance(exc, NotFoundError):
            raise
        stored = tasks.get(state, collection, task)
        context = _form_context(stored, tasks.definition(stored), None, variables, settings, _refusal(exc))
        return page(request, "task.html", context, status_code=422)
    note(request, object_id=record.trajectory_id)
    return _see_other(f"/runs/{record.trajectory_id}")


@router.get("/runs/{trajectory_id}/again")
def again_page(request: Request, state: StateDep, caller: PageCaller, trajectory_id: str) -> HTMLResponse:
    """A new run's form filled from this run: for any run the caller may see."""
    source = again.of_run(state, caller, trajectory_id)
    stored = _stored_or_none(state, source)
    context = _form_context(stored or _Named(source), source.task, source, source.variables, source.settings)
    return page(request, "task.html", context)


@router.post("/runs/{trajectory_id}/again")
async def start_again(request: Request, state: StateDep, caller: FormCaller, trajectory_id: str) -> Response:
    form = await request.form(max_files=MAX_FILES)
    variables, settings, files = _form_values(form)
    keep = [v for k, v in form.multi_items() if k == "keep" and isinstance(v, str)]
    try:
        record = await run_in_threadpool(
            again.start, state, caller, trajectory_id, variables, settings, keep, files
        )
    except (Invalid, InputError) as exc:
        if isinstance(exc, NotFoundError):
            raise
        source = again.of_run(state, caller, trajectory_id)
        stored = _stored_or_none(state, source)
        context = _form_context(
            stored or _Named(source), source.task, source, variables, settings, _refusal(exc)
        )
        return page(request, "task.html", context, status_code=422)
    return _see_other(f"/runs/{record.trajectory_id}")


class _Named:
    """A task's name and collection, for the form of a run whose task is not stored."""

    def __init__(self, source: again.Again) -> None:
        self.collection, self.name, self.description = source.source.collection, source.source.task, None


def _stored_or_none(state: ApiState, source: again.Again) -> Any:
    return tasks.get(state, source.source.collection, source.source.task) if source.stored else None


# collection settings


@router.get("/collections")
def collections_page(request: Request, state: StateDep, caller: PageCaller) -> HTMLResponse:
    context = {
        "collections": collections.names(state, caller),
        "stored": set(_stored_collections(state, caller)),
    }
    return page(request, "collections.html", context)


def _quotas(state: ApiState, collection: str) -> list[tuple[str, int | None, bool]]:
    """(quota, value in force, whether the admin set it) for the settings page."""
    found = collections.quotas(state, collection)
    return [(name, value, name in found.overrides) for name, value in found.in_force.items()]


def _volumes(state: ApiState, collection: str) -> dict[str, Any]:
    """The collection's volumes for the settings page; an engine that cannot be
    reached says so there instead of failing the page."""
    try:
        if not state.services.backend.capabilities.volumes:
            return {"volumes": [], "volumes_note": "This server's sandbox backend has no volumes."}
        return {"volumes": volumes.volumes(state, collection), "volumes_note": None}
    except SandboxError as exc:
        return {"volumes": [], "volumes_note": f"The volumes could not be listed: {exc}"}


async def _settings_context(
    state: ApiState, caller: Caller, collection: str, new_token: str | None = None
) -> dict[str, Any]:
    return {
        "collection": collection,
        "env_names": collections.environment(state, collection),
        "tokens": collections.tokens(state, collection) if caller.admin else None,
        "new_token": new_token,
        "quotas": _quotas(state, collection),
        "volume_error": None,
        **await run_in_threadpool(_volumes, state, collection),
    }


@router.get("/collections/{collection}/settings")
async def settings_page(
    request: Request, state: StateDep, caller: PageCaller, collection: str, new_token: str | None = None
) -> HTMLResponse:
    await collection_access(collection, state, caller)
    return page(request, "settings.html", await _settings_context(state, caller, collection))


@router.post("/collections/{collection}/environment")
async def set_env(request: Request, state: StateDep, caller: FormCaller, collection: str) -> RedirectResponse:
    """`name` and `value` set a variable; `delete` names one to remove."""
    await collection_access(collection, state, caller)
    form = await request.form()
    deleted = str(form.get("delete") or "")
    change: dict[str, str | None] = (
        {deleted: None} if deleted else {str(form.get("name") or ""): str(form.get("value") or "")}
    )
    note(request, **collections.environment_audit(change))
    await run_in_threadpool(collections.change_environment, state, collection, change)
    return _see_other(f"/collections/{collection}/settings#environment")


@router.post("/collections/{collection}/tokens")
async def create_token(
    request: Request, state: StateDep, caller: FormCaller, collection: str
) -> HTMLResponse:
    """A new token, shown on the answer page only (never in a URL)."""
    await collection_access(collection, state, caller)
    form = await request.form()
    await require_admin(caller)
    label = str(form.get("label") or "web")[:200]
    token = await run_in_threadpool(collections.issue_token, state, collection, label)
    context = await _settings_context(state, caller, collection, new_token=token)
    return page(request, "settings.html", context, status_code=201)


@router.post("/collections/{collection}/tokens/{token_id}/revoke")
async def revoke_token(
    request: Request,
    state: StateDep,
    caller: FormCaller,
    collection: str,
    token_id: Annotated[int, FastPath(ge=1, le=MAX_TOKEN_ID)],
) -> RedirectResponse:
    await collection_access(collection, state, caller)
    await require_admin(caller)
    await run_in_threadpool(collections.revoke_token, state, collection, token_id)
    return _see_other(f"/collections/{collection}/settings#tokens")


@router.post("/collections/{collection}/volumes/{name}/remove")
async def remove_volume(
    request: Request, state: StateDep, caller: FormCaller, collection: str, name: str
) -> Response:
    """Remove the collection's volume and its data, as `DELETE
    /api/v1/volume/{c}/{name}` does; refused (409, the page again with the
    service's message) while a sandbox mounts it."""
    await collection_access(collection, state, caller)
    try:
        await run_in_threadpool(volumes.remove, state, collection, name)
    except ServiceError as exc:
        context = await _settings_context(state, caller, collection) | {"volume_error": exc.detail}
        return page(request, "settings.html", context, status_code=exc.status)
    return _see_other(f"/collections/{collection}/settings#volumes")


# overview


@router.get("/overview")
def overview_page(
    request: Request, state: StateDep, caller: PageCaller, collection: str | None = None
) -> HTMLResponse:
    """Per task with runs (its latest OVERVIEW_RUNS in each collection), then
    the stored tasks that have none yet."""
    names = collections.names(state, caller)
    shown = [collection] if collection in names else names
    sections: list[dict[str, Any]] = []
    for name in shown:
        for found in tasks.with_runs(state, name, OVERVIEW_RUNS):
            if found.stats is None:
                sections.append({"collection": name, "task": found.task, "stored": True, "stats": None,
                                 "days": [], "charts": None})  # fmt: skip
                continue
            days = charts.by_day(found.runs)
            sections.append({"collection": name, "task": found.task, "stored": found.stored, "days": days,
                             "stats": found.stats, "cost": found.stats.cost_usd if found.stats.cost_runs else None,
                             "charts": charts.task_charts(days)})  # fmt: skip
    return page(
        request, "overview.html", {"sections": sections, "collections": names, "collection": collection}
    )


# the audit log


@router.get("/audit")
def audit_page(
    request: Request,
    state: StateDep,
    caller: PageCaller,
    collection: str | None = None,
    action: str | None = None,
    actor: str | None = None,
) -> HTMLResponse:
    """Who changed what: the admin sees every collection's, a collection its own."""
    collection = audit.scope(caller, collection)
    entries = audit.entries(
        state, caller, collection=collection or None, action=action or None, actor=actor or None, limit=200
    )
    filters = {"collection": collection or "", "action": action or "", "actor": actor or ""}
    return page(request, "audit.html", {"entries": entries, "filters": filters})
