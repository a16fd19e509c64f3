"""An experiment's runs as ATIF trajectories (pier.agents.atif), one JSON
object a line: each run's agent transcript as its collect stage stored it
(`logs/<agent>.<ext>`, else `logs/agent.log`), with the run's identity, cell
labels and outcome in `extra`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from importlib.metadata import version

from pier.agents.atif import Trajectory as AtifTrajectory
from pier.agents.atif import trajectory
from pier.agents.pins import PINS
from pier.errors import NotFoundError
from pier.experiments.results import outcome
from pier.record import Trajectory
from pier.storage.base import RunStorage

MAX_STREAM_BYTES = 64 << 20  # a transcript larger than this is cut (the export stays readable)
STREAMS = ("{agent}.jsonl", "{agent}.json", "{agent}.log", "agent.log")


def transcript(storage: RunStorage, record: Trajectory) -> str | None:
    agent = record.outputs.agent or str(record.init_params.get("agent") or "")
    for name in STREAMS:
        key = f"{record.storage_path}/logs/{name.format(agent=agent)}"
        try:
            with storage.open(key) as stream:
                return stream.read(MAX_STREAM_BYTES).decode("utf-8", "replace")
        except (NotFoundError, FileNotFoundError):
            continue
    return None


def run_trajectory(storage: RunStorage, record: Trajectory) -> AtifTrajectory | None:
    """The run's trajectory; None when it stored no transcript (it never reached its agent)."""
    stream = transcript(storage, record)
    if stream is None:
        return None
    agent = record.outputs.agent or str(record.init_params.get("agent") or "unknown")
    pin = PINS.get(agent)
    instruction = record.run.inputs.get("instruction")
    return trajectory(
        record.trajectory_id, agent, pin.version if pin else version("pier"),
        record.outputs.model or record.init_params.get("model"), stream,
        instruction=instruction if isinstance(instruction, str) else None,
        usage=record.outputs.usage,
        extra={"pier": {"trajectory_id": record.trajectory_id, "collection": record.collection,
                        "task": record.name, "status": record.status.value, "outcome": outcome(record),
                        "success": record.success,
                        "labels": {label.key: label.value for label in record.labels}}},
    )  # fmt: skip


def trajectories_jsonl(storage: RunStorage, records: Iterable[Trajectory]) -> str:
    lines = []
    for record in records:
        found = run_trajectory(storage, record)
        if found is not None:
            lines.append(json.dumps(found.model_dump(mode="json", exclude_none=True)))
    return "".join(line + "\n" for line in lines)
