"""Runs: starting one (with its attached files), finding them (one, a task's,
or across the collections a caller may see), cancelling, labelling, reading a
run's log and its outputs, a task's figures, and storing a run made elsewhere."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO, Protocol

from pydantic import ValidationError

from pier.db import Event, Store
from pier.db.runs import LabelFilter
from pier.errors import InputError, NotFoundError, StageError
from pier.lifecycle.files import save_uploads
from pier.names import check_task_name, trajectory_id_of
from pier.record import Label, RunStatus, Trajectory, storage_key
from pier.server.auth import Caller
from pier.server.dispatcher import RunParams
from pier.server.errors import ServiceError, invalid, invalid_fields
from pier.server.models import IngestRequest, LabelCreate, RunCreate, TaskStats
from pier.server.services.ingest import ingest as _ingest
from pier.server.services.inputs import refuse_nul
from pier.server.services.stats import task_stats
from pier.server.state import ApiState
from pier.storage.archive import zip_stream
from pier.storage.base import upload_prefix
from pier.tasks.model import Task

MAX_FILES = 1000  # the files one form may carry: a run's, or an upload's
MAX_KEY = 255  # an idempotency key, as the store's column keeps it
STATS_LIMIT = 100_000  # a task's figures: of its latest this many runs


class Upload(Protocol):
    """A file sent with a run: a form's file part (Starlette's UploadFile is one)."""

    @property
    def filename(self) -> str | None: ...

    @property
    def size(self) -> int | None: ...

    @property
    def file(self) -> BinaryIO: ...


# finding a run


def run_of(store: Store, collection: str, task: str | None, trajectory_id: str) -> Trajectory:
    """The run, if it belongs to collection (and task, when given). A run of
    another collection is 'not found', so ids reveal nothing across collections."""
    where = f"{collection}/{task}" if task is not None else collection
    missing = NotFoundError(f"run {trajectory_id!r} not found in {where}: check the trajectory id")
    try:
        record = store.get_run(trajectory_id, collection)
    except NotFoundError:
        raise missing from None
    if task is not None and record.task != task:
        raise missing
    return record


def get(state: ApiState, collection: str, task: str | None, trajectory_id: str) -> Trajectory:
    return run_of(state.store, collection, task, trajectory_id)


def visible(
    state: ApiState, caller: Caller, trajectory_id: str, workflow_id: str | None = None
) -> Trajectory:
    """The run with this id that the caller may see. Runs of different
    collections share an id only when each chose it for an ingest; a workflow
    id (`<collection>-<task>--<id>`) tells them apart, else the caller's own
    is the one. 'Not found' when none (or, for the admin, several) match."""
    found = [r for r in state.store.runs_with_id(trajectory_id) if caller.may_use(r.collection)]
    if len(found) > 1 and workflow_id is not None:
        found = [r for r in found if r.workflow_id == workflow_id]
    if len(found) != 1:
        raise NotFoundError(f"run {trajectory_id!r} not found: check the trajectory id")
    return found[0]


def find(
    state: ApiState,
    caller: Caller,
    *,
    collection: str | None = None,
    task: str | None = None,
    statuses: Sequence[RunStatus] = (),
    success: bool | None = None,
    labels: Sequence[str] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 20,
    page: int = 1,
) -> tuple[list[Trajectory], int]:
    """One page of runs across the collections this caller may see, newest
    first, and how many match in all: a collection token's own collection's,
    the admin's every collection's or the one named (403 for a collection the
    caller may not use). `labels` are `key` or `key=value`, each required; a
    time without a zone is UTC."""
    if collection is not None:
        caller.check(collection)
    elif not caller.admin:
        collection = caller.collection
    return state.store.list_runs(
        collection,
        task,
        limit=limit,
        offset=(page - 1) * limit,
        statuses=list(statuses) or None,
        labels=[label_filter(v) for v in labels],
        since=_utc(since),
        until=_utc(until),
        success=success,
    )


def of_task(
    state: ApiState, collection: str, task: str, *, limit: int = 20, page: int = 1, labels: Sequence[str] = ()
) -> tuple[list[Trajectory], int]:
    """One page of a task's runs, newest first, and how many match in all."""
    return state.store.list_runs(
        collection, task, limit=limit, offset=(page - 1) * limit, labels=[label_filter(v) for v in labels]
    )


def _utc(moment: datetime | None) -> datetime | None:
    """A time without a zone is taken as UTC, as the store keeps times."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def label_filter(text: str) -> LabelFilter:
    """`key` or `key=value` as the store filters by it."""
    key, sep, value = text.partition("=")
    if not key.strip():
        raise invalid("label", f"{text!r} names no key: write key or key=value")
    return key, value if sep else None


# starting and cancelling


def accept(
    state: ApiState,
    collection: str,
    task: str,
    fields: dict[str, Any],
    uploads: Sequence[Upload] = (),
    key: str | None = None,
) -> Trajectory:
    """A run of the task from a body's fields (a JSON body's, a multipart
    form's, the web UI's form's: the same checks and 422s whichever) and the
    files attached to it. The files are stored as an upload and added to
    init_params.file_paths, and removed again when the run is refused. A retry
    with the same idempotency key answers with the run the first one made."""
    return _accept(state, collection, task, None, fields, uploads, key)


def accept_task(
    state: ApiState,
    collection: str,
    name: str,
    task: Task,
    fields: dict[str, Any],
    uploads: Sequence[Upload] = (),
) -> Trajectory:
    """accept, for a task given whole rather than stored (a run again of a run
    whose task is not stored, such as a `pier run`'s): the same checks."""
    return _accept(state, collection, name, task, fields, uploads, None)


def _accept(
    state: ApiState,
    collection: str,
    task: str,
    given: Task | None,
    fields: dict[str, Any],
    uploads: Sequence[Upload],
    key: str | None,
) -> Trajectory:
    body = _validated(fields)
    key = _key(key)
    if key is not None:  # a retry: its files were stored the first time
        earlier = state.dispatcher.keyed_run(collection, key)
        if earlier is not None:
            return earlier

    def dispatch(params: RunParams) -> Trajectory:
        if given is None:
            return state.dispatcher.accept(collection, task, params)
        return state.dispatcher.accept_task(collection, task, given, params)

    if not uploads:
        return dispatch(_params(body, [], key))
    if given is None:
        state.store.get_task(collection, task)  # 404 before any file is stored
    state.quotas.check_new_run(collection, bool(body.init_params.get("continue_from")))  # 429 before any file
    state.quotas.check_upload(collection, sum(f.size or 0 for f in uploads))
    streams = [(f.filename, f.file) for f in uploads]
    upload_id, paths = save_uploads(state.storage, collection, streams, state.settings.scratch_root)
    state.quotas.uploaded(collection)
    try:
        return dispatch(_params(body, paths, key))
    except BaseException:
        state.storage.delete(upload_prefix(collection, upload_id))
        raise


def _validated(fields: dict[str, Any]) -> RunCreate:
    refuse_nul(fields)
    try:
        return RunCreate.model_validate(fields)
    except ValidationError as exc:
        raise invalid_fields(exc.errors()) from None


def _key(key: str | None) -> str | None:
    if key is None:
        return None
    if not key.strip() or len(key) > MAX_KEY or not key.isprintable():
        raise ServiceError(422, f"the Idempotency-Key header must be 1 to {MAX_KEY} printable characters")
    return key


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


def cancel(
    state: ApiState, collection: str, task: str, trajectory_ids: Sequence[str]
) -> dict[str, RunStatus]:
    """Cancels each run (all must exist in the task, or 404 and none is): a
    pending one never starts, a running one loses its sandbox within seconds. A
    run that already ended keeps its status. Each run's status after."""
    refuse_nul(dict.fromkeys(trajectory_ids, "cancelled"))
    records = [run_of(state.store, collection, task, tid) for tid in trajectory_ids]
    return {record.trajectory_id: state.dispatcher.cancel(record) for record in records}


# labels, logs, outputs, figures


def add_label(
    state: ApiState,
    collection: str,
    task: str | None,
    trajectory_id: str,
    key: str,
    value: str = "",
    author: str | None = None,
) -> tuple[Label, list[Label]]:
    """Labels a run (the collection is the author unless one is given): the
    label, and every label of the run after, oldest first. A key or value
    past the rules of LabelCreate is a 422 naming it."""
    checked = LabelCreate.model_validate({"key": key, "value": value, "author": author})
    store = state.store
    run_of(store, collection, task, trajectory_id)
    label = Label(key=checked.key, value=checked.value, author=checked.author or collection)
    store.add_labels(trajectory_id, [label], collection=collection)
    return label, store.get_run(trajectory_id, collection).labels


def lines(state: ApiState, trajectory_id: str, after: int = 0, limit: int = 1000) -> list[Event]:
    """The run's log lines after seq `after`, in order, at most `limit`."""
    return state.store.events(trajectory_id, after, limit)


@dataclass(frozen=True)
class LogPage:
    record: Trajectory
    lines: list[Event]
    next_after: int  # the seq to read on from
    has_more: bool


def log_of_workflow(state: ApiState, caller: Caller, workflow_id: str, after: int, limit: int) -> LogPage:
    """A run's log by workflow id (`<collection>-<task>--<trajectory_id>`, or a
    bare trajectory id): its lines after `after`, at most `limit`."""
    trajectory_id = trajectory_id_of(workflow_id)
    try:
        record = visible(state, caller, trajectory_id, workflow_id)
    except NotFoundError:
        raise NotFoundError(f"run {trajectory_id!r} not found: check the workflow id") from None
    events = state.store.events(trajectory_id, after_seq=after, limit=limit + 1)
    shown = events[:limit]
    return LogPage(record, shown, shown[-1].seq if events else after, len(events) > limit)


def outputs_zip(state: ApiState, collection: str, task: str, trajectory_id: str) -> Iterator[bytes]:
    """The ended run's stored outputs as zip bytes, made while they are read
    (nothing whole in memory or on disk); 409 while it runs."""
    record = run_of(state.store, collection, task, trajectory_id)
    if not record.status.terminal:
        raise ServiceError(
            409, f"run {trajectory_id} is {record.status.value}: download its outputs when it has ended"
        )
    try:
        return zip_stream(state.storage, storage_key(collection, task, trajectory_id))
    except NotFoundError:
        raise NotFoundError(f"no stored outputs for run {trajectory_id!r} ({collection}/{task})") from None


def stats(state: ApiState, collection: str, task: str) -> TaskStats:
    """Counts by status, success rate (of ended runs), durations, reported cost."""
    records, _ = state.store.list_runs(collection, task, limit=STATS_LIMIT)
    return task_stats(collection, task, records)


def ingest(state: ApiState, collection: str, task: str, body: IngestRequest) -> Trajectory:
    """Stores a run made elsewhere; idempotent on its trajectory_id."""
    return _ingest(state.store, state.storage, collection, check_task_name(task), body)


def trace_url(state: ApiState, record: Trajectory) -> str | None:
    """The run's trace in the operator's trace viewer (PIER_TRACE_URL), when both are known."""
    template = state.settings.trace_url
    if not template or not record.trace_id:
        return None
    return template.replace("{trace_id}", record.trace_id)


def save_snapshot(state: ApiState, collection: str, trajectory_id: str, name: str) -> str:
    """The kept sandbox of a run of `collection` saved as the collection's
    snapshot `name` (docs/sessions.md); the image ref. Another collection's run
    is not found; a run whose sandbox is not kept is refused (422)."""
    from pier.lifecycle.sessions import save_snapshot as save

    return save(state.store, state.services.backend, collection, trajectory_id, name)


def pause_sandbox(state: ApiState, collection: str, trajectory_id: str, pause: bool) -> str:
    """Pause (or resume) the kept sandbox of a run of `collection`
    (docs/sessions.md); its id. Another collection's run is not found (404); a
    run whose sandbox is not kept, expired or in use is refused (409)."""
    from pier.lifecycle.sessions import pause_kept

    try:
        return pause_kept(state.store, state.services.backend, collection, trajectory_id, pause)
    except NotFoundError:
        raise
    except InputError as exc:
        raise ServiceError(409, str(exc)) from None


def continue_in(
    state: ApiState, collection: str, task: str, trajectory_id: str, init_params: dict[str, Any]
) -> Trajectory:
    """A run of the collection's task in the kept sandbox of run
    `trajectory_id` (init_params.continue_from, docs/sessions.md), as `accept`
    makes it. What the run's claim would refuse by the record (another
    collection's run, one not kept, expired, still running, a sandbox in use)
    is refused first (409, in the claim's words) and no run is made; the claim
    at the run's start still decides (a run that took the sandbox meanwhile
    fails it at create, as over the API)."""
    from pier.lifecycle.sessions import continuable

    try:
        continuable(state.store, trajectory_id, collection)
    except StageError as exc:
        raise ServiceError(409, exc.message) from None
    return accept(state, collection, task, {"init_params": {**init_params, "continue_from": trajectory_id}})
