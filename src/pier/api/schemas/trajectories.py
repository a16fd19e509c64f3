"""Bodies about runs already made: labels, stats, ingested runs, logs."""

from __future__ import annotations

from pydantic import BaseModel, Field

from pier.db.schemas import Event
from pier.record import Label, RunStatus
from pier.server.models import KEY_PATTERN as KEY_PATTERN
from pier.server.models import DurationStats as DurationStats
from pier.server.models import IngestRequest as IngestRequest
from pier.server.models import LabelCreate as LabelCreate
from pier.server.models import TaskStats as TaskStats


class LabelAdded(BaseModel):
    trajectory_id: str
    label: Label
    labels: list[Label] = Field(description="every label of the run, oldest first")


class IngestResult(BaseModel):
    trajectory_id: str
    name: str
    storage_path: str
    status: RunStatus
    labels: list[Label]


class WorkflowLogs(BaseModel):
    workflow_id: str
    trajectory_id: str
    status: RunStatus
    logs: list[Event]
    next_after: int = Field(description="pass as ?after= for the lines that follow")
    has_more: bool
