"""A request for a run, and the checks every caller makes before accepting one,
in a module of their own: `pier validate` plans runbooks without loading the
runner, its stages or the sandbox backends."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pier.lifecycle.plan import FileResolver, RunInputs, RunPlan, plan_run
from pier.names import check_collection_name, check_name
from pier.settings import Settings
from pier.tasks.model import Task


@dataclass(frozen=True)
class RunRequest:
    collection: str
    task_name: str
    task: Task
    run_params: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    resolve_file: FileResolver | None = None
    trajectory_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    source_dir: Path | None = None  # local check sources allowed, relative to here
    # Variables of env that hold a key the server holds for its users (trial keys).
    operator_keys: frozenset[str] = frozenset()

    def inputs(self) -> RunInputs:
        return RunInputs(
            self.trajectory_id,
            self.collection,
            self.task_name,
            self.env,
            self.resolve_file,
            source_dir=self.source_dir,
            operator_keys=self.operator_keys,
        )


def preflight(request: RunRequest, settings: Settings) -> RunPlan:
    """Everything prepare checks, without side effects: raises InputError on bad input
    so callers can refuse a run before accepting it."""
    check_collection_name(request.collection)
    check_name("task", request.task_name)
    _, plan, _ = plan_run(request.task, request.run_params, request.inputs(), settings)
    return plan
