"""Finding a run as a route names it: by collection, task and trajectory id,
or by a bare trajectory id (or workflow id) among the runs the caller may see."""

from __future__ import annotations

from collections.abc import Callable

from pier.db import Store
from pier.errors import NotFoundError
from pier.record import Trajectory


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


def visible_run(
    store: Store, trajectory_id: str, may_use: Callable[[str], bool], workflow_id: str | None = None
) -> Trajectory:
    """The run with this id that the caller may see. Runs of different
    collections share an id only when each chose it for an ingest; a workflow
    id (`<collection>-<task>--<id>`) tells them apart, else the caller's own
    is the one. 'Not found' when none (or, for the admin, several) match."""
    found = [r for r in store.runs_with_id(trajectory_id) if may_use(r.collection)]
    if len(found) > 1 and workflow_id is not None:
        found = [r for r in found if r.workflow_id == workflow_id]
    if len(found) != 1:
        raise NotFoundError(f"run {trajectory_id!r} not found: check the trajectory id")
    return found[0]
