"""Bodies about runs already made: labels, stats, ingested runs, logs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pier.db.schemas import Event
from pier.record import Label, RunStatus

KEY_PATTERN = r"^\S(.{0,253}\S)?$"


class LabelCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=255, pattern=KEY_PATTERN, description="e.g. eval.grade")
    value: str = Field("", max_length=65536)
    author: str | None = Field(None, max_length=255)


class LabelAdded(BaseModel):
    trajectory_id: str
    label: Label
    labels: list[Label] = Field(description="every label of the run, oldest first")


class DurationStats(BaseModel):
    count: int
    mean: float | None
    median: float | None
    p95: float | None
    min: float | None
    max: float | None


class TaskStats(BaseModel):
    collection: str
    task: str
    total: int
    by_status: dict[str, int]
    completed: int
    failed: int
    success_rate: float | None = Field(description="successful / ended runs; null when none ended")
    duration_seconds: DurationStats
    cost_usd: float = Field(description="sum of the runs' reported cost")
    cost_runs: int = Field(description="how many runs reported a cost")


class IngestRequest(BaseModel):
    """A finished run made elsewhere, stored as a trajectory (no sandbox)."""

    model_config = ConfigDict(extra="forbid")

    input: Any = None
    output: Any = None
    status: RunStatus = RunStatus.completed
    scores: dict[str, float] = Field(default_factory=dict, description="stored as score.<name> labels")
    labels: dict[str, str] = Field(default_factory=dict)
    cost_usd: float | None = Field(None, ge=0, description="stored as a cost_est_usd label")
    trajectory_id: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
    source: str | None = None
    eval_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    author: str | None = Field(None, max_length=255)
    created: datetime | None = None
    completed: datetime | None = None


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
