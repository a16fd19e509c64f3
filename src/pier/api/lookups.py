"""Finding a run as a route names it: by collection, task and trajectory id."""

from __future__ import annotations

from pier.db import Store
from pier.errors import NotFoundError
from pier.record import Trajectory


def run_of(store: Store, collection: str, task: str | None, trajectory_id: str) -> Trajectory:
    """The run, if it belongs to collection (and task, when given). A run of
    another collection is 'not found', so ids reveal nothing across collections."""
    record = store.get_run(trajectory_id)
    if record.collection != collection or (task is not None and record.task != task):
        where = f"{collection}/{task}" if task is not None else collection
        raise NotFoundError(f"run {trajectory_id!r} not found in {where}: check the trajectory id")
    return record
