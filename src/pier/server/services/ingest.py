"""Storing a run made elsewhere (an external eval) as a trajectory: no sandbox,
no stages; its input and output on `steps.run`, its scores as `score.<name>`
labels. Pushing the same trajectory_id again replaces it in place."""

from __future__ import annotations

import re
import uuid

from pier.db import Store
from pier.errors import InputError, NotFoundError
from pier.record import (
    RUN_STEP,
    Label,
    Step,
    StepOutputs,
    Trajectory,
    TrajectoryAttribute,
    storage_key,
    utcnow,
)
from pier.server.models import IngestRequest
from pier.storage.base import RunStorage

INGEST_ACTIVITY = "ingest"
COST_LABEL = "cost_est_usd"


def ingested(collection: str, task: str, body: IngestRequest) -> tuple[Trajectory, list[Label]]:
    """The trajectory and its labels for an ingest request."""
    tid = body.trajectory_id or uuid.uuid4().hex
    author = body.author or "ingest"
    created = body.created or utcnow()
    ended = (body.completed or utcnow()) if body.status.terminal else None
    params = {**body.metadata, **{k: v for k, v in (("source", body.source), ("eval_id", body.eval_id)) if v}}
    step = Step(
        activity=INGEST_ACTIVITY,
        inputs={"input": body.input},
        outputs=StepOutputs(output=body.output, success=body.status.value == "completed"),
        created=created,
        ended=ended,
        author=author,
        duration_seconds=round((ended - created).total_seconds(), 3) if ended else None,
    )
    record = Trajectory(
        name=task,
        collection=collection,
        trajectory_id=tid,
        storage_path=storage_key(collection, task, tid),
        metadata_uri=storage_key(collection, task, tid, "run.json"),
        status=body.status,
        attributes=TrajectoryAttribute(created=created, params=params),
        created=created,
        author=author,
        steps={RUN_STEP: step},
        total_steps=[RUN_STEP],
        completed_steps=[RUN_STEP] if body.status.value == "completed" else [],
        started=created,
        ended=ended,
        duration_seconds=step.duration_seconds,
    )
    labels = [
        Label(key=f"score.{name}", value=repr(float(v)), author=author) for name, v in body.scores.items()
    ]
    labels += [Label(key=k, value=v, author=author) for k, v in body.labels.items()]
    if body.cost_usd is not None:
        labels.append(Label(key=COST_LABEL, value=repr(float(body.cost_usd)), author=author))
    return record, labels


# The form of the trajectory ids pier makes (uuid4().hex).
PIER_ID = re.compile(r"[0-9a-f]{32}")


def ingest(store: Store, storage: RunStorage, collection: str, task: str, body: IngestRequest) -> Trajectory:
    """Store the run; a `trajectory_id` the collection already used for an
    ingest into this task replaces that one. What other collections hold never
    changes the answer: a run is keyed by its id within its collection, so an
    id another collection chose is this one's to choose too, and an id of the
    form pier makes (which may name a run pier executed elsewhere) may only
    name an earlier ingest of this collection and task."""
    record, labels = ingested(collection, task, body)
    tid = record.trajectory_id
    try:
        existing = store.get_run(tid, collection)
    except NotFoundError:
        existing = None
    if existing is not None and (existing.name, _activity(existing)) != (task, INGEST_ACTIVITY):
        raise InputError(
            f"trajectory_id: {tid!r} is a run of {collection} that was not ingested into {collection}/{task}: "
            "leave trajectory_id out, or use the id an earlier ingest returned"
        )
    if existing is None and body.trajectory_id is not None and PIER_ID.fullmatch(tid):
        raise InputError(
            f"trajectory_id: {tid!r} has the form of the ids pier makes (32 hex digits) and names no run "
            f"ingested into {collection}/{task}: such an id may only push an earlier ingest again; leave "
            "trajectory_id out to get a new one, or choose an id of another form"
        )
    store.save_run(record, replace_final=True)  # a re-push replaces the earlier one in place
    store.add_labels(tid, labels, replace=True, collection=collection)
    stored = store.get_run(tid, collection)
    key = storage_key(collection, task, tid, "run.json")
    storage.put_bytes(key, stored.model_dump_json(indent=2).encode(), "application/json")
    return stored


def _activity(record: Trajectory) -> str | None:
    return record.steps.get(RUN_STEP, Step()).activity
