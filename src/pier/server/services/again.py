"""Running a run again: the form of a new run filled from one the caller may
see (its variables, files, image, snapshot, model and whether it kept its
sandbox), and the new run made
from it. It works for any run the caller may see: a stored task's (the task
as it is now), and one made elsewhere with no stored task, such as a `pier
run` in the `local` collection (its runbook and settings are in its record).
The files are attached again from storage: the run's own uploads where they
are still stored, else the copies of them its run kept (`<run>/assets/`)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from pier.errors import NotFoundError
from pier.record import RUN_STEP, Trajectory
from pier.server.auth import Caller
from pier.server.errors import invalid, invalid_fields
from pier.server.services import runs
from pier.server.state import ApiState
from pier.storage.base import RunStorage, clean_key
from pier.tasks.model import Task

TEXT_FIELDS = ("image", "snapshot", "model")  # a run form's settings typed in
KEEP = "keep_sandbox"  # and whether the sandbox is kept after the run (a checkbox: "true" or "false")
FORM_FIELDS = (*TEXT_FIELDS, KEEP)  # the settings a run form takes, beside its variables and files


@dataclass(frozen=True)
class SourceFile:
    name: str  # the file's name in /app/assets
    key: str | None  # where it is stored now; None when nothing of it is kept


@dataclass(frozen=True)
class Again:
    source: Trajectory
    task: Task  # what the new run runs
    stored: bool  # the task is stored in the run's collection (else: the run's own copy of it)
    variables: dict[str, str]
    settings: dict[str, str]  # image, snapshot, model, keep_sandbox as the run had them ("" for unset)
    files: list[SourceFile]


def of_run(state: ApiState, caller: Caller, trajectory_id: str) -> Again:
    """What a new run of this one starts from; 'not found' for a run the caller may not see."""
    source = runs.visible(state, caller, trajectory_id)
    inputs = source.run.inputs
    try:
        stored = state.store.get_task(source.collection, source.task)
        task, is_stored = Task.model_validate(stored.definition), True
    except NotFoundError:
        task, is_stored = _task_of(source), False
    variables = {k: _text(v) for k, v in (inputs.get("vars") or {}).items() if v is not None}
    settings = {name: _text(inputs.get(name)) for name in FORM_FIELDS}
    files = [_source_file(state.storage, source, path) for path in inputs.get("file_paths") or []]
    return Again(source, task, is_stored, variables, settings, files)


def start(
    state: ApiState,
    caller: Caller,
    trajectory_id: str,
    variables: Mapping[str, str],
    settings: Mapping[str, str],
    keep: Sequence[str],
    uploads: Sequence[runs.Upload] = (),
) -> Trajectory:
    """A new run of the run's task with these variables and settings (an empty
    one is the task's own), the run's files named in `keep` attached again from
    storage, and `uploads` added. A kept file that is no longer stored is a 422
    naming it, never silently dropped."""
    again = of_run(state, caller, trajectory_id)
    by_name = {f.name: f for f in again.files}
    keys = []
    for name in keep:
        found = by_name.get(name)
        if found is None or found.key is None:
            raise invalid("files", f"{name!r} of run {trajectory_id} is no longer stored: attach it again")
        keys.append(found.key)
    init = run_fields(variables, settings)
    if keys or "file_paths" in again.task.init_params:
        init["file_paths"] = keys  # the run's files, not the task's and the run's again
    fields = {"init_params": init}
    source = again.source
    if again.stored:
        return runs.accept(state, source.collection, source.task, fields, uploads)
    return runs.accept_task(state, source.collection, source.task, again.task, fields, uploads)


def run_fields(variables: Mapping[str, str], settings: Mapping[str, str]) -> dict[str, Any]:
    """A run form's init_params: only what was filled in. An empty variable is
    not given (a required one is then refused by the plan's rules, as the CLI
    and the API refuse it; one with a default takes it); an empty setting is the
    task's own. An image given without a snapshot is the sandbox's image.
    keep_sandbox "true" or "false" is that boolean; any other text is given as
    it is, for the plan to refuse in its words (as the API's JSON would be)."""
    init: dict[str, Any] = {}
    given = {k: v for k, v in variables.items() if v != ""}
    if given:
        init["vars"] = given
    for name in FORM_FIELDS:
        value = (settings.get(name) or "").strip()
        if value:
            init[name] = value
    if KEEP in init:
        init[KEEP] = {"true": True, "false": False}.get(init[KEEP], init[KEEP])
    if "image" in init and "snapshot" not in init:
        init["snapshot"] = ""
    return init


def _task_of(source: Trajectory) -> Task:
    """The task a run with no stored task ran: its resolved parameters (its
    runbook among them) and its step's config, as its record keeps them."""
    init = {  # not the sandbox it continued in: that one is claimed (the form says whether to keep)
        k: v
        for k, v in source.run.inputs.items()
        if k not in ("file_paths", "continue_from") and v is not None
    }
    config = source.step_configs.get(RUN_STEP)
    try:
        return Task.model_validate(
            {"init_params": init, **({"step_configs": {RUN_STEP: config}} if config else {})}
        )
    except ValidationError as exc:
        raise invalid_fields(exc.errors()) from None


def _source_file(storage: RunStorage, source: Trajectory, path: Any) -> SourceFile:
    """Where one of the run's attachments is stored now: the upload it came from,
    else the copy its run kept in `<run>/assets/<name>` (a host path of a `pier
    run` is never read: it is the run's copy that counts)."""
    text = str(path)
    name = posixpath.basename(text.replace("\\", "/").rstrip("/")) or text
    if name in (".", ".."):
        return SourceFile(name, None)
    candidates = []
    key = clean_key(text)
    if key is not None and key.startswith(f"{source.collection}/"):
        candidates.append(key)
    kept = clean_key(f"{source.storage_path}/assets/{name}")
    if kept is not None and kept.startswith(f"{source.collection}/"):
        candidates.append(kept)
    for candidate in candidates:
        try:
            storage.stat(candidate)
        except (NotFoundError, OSError, ValueError):
            continue
        return SourceFile(name, candidate)
    return SourceFile(name, None)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)
