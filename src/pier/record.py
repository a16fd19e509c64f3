"""The run record: one pydantic model, stored by the store, printed by the CLI,
served by the API."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

STAGES = (
    "prepare",
    "create",
    "setup",
    "run_agent",
    "cleanup_credentials",
    "collect",
    "check",
    "save",
)


def utcnow() -> datetime:
    return datetime.now(UTC)


class RunStatus(StrEnum):
    pending = "pending"
    running = "running"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (RunStatus.completed, RunStatus.failed, RunStatus.cancelled)


class StepStatus(StrEnum):
    pending = "pending"
    running = "running"
    completed = "completed"
    failed = "failed"
    skipped = "skipped"


class StepRecord(BaseModel):
    name: str
    status: StepStatus = StepStatus.pending
    started: datetime | None = None
    ended: datetime | None = None
    duration_seconds: float | None = None
    detail: str | None = None


class RunError(BaseModel):
    stage: str
    message: str


class ResultFile(BaseModel):
    path: str
    content_type: str
    extension: str
    size: int


class CheckResult(BaseModel):
    name: str
    type: str
    passed: bool
    exit_code: int | None = None
    output: str = ""
    duration_s: float = 0.0


class SandboxRecord(BaseModel):
    source: str | None = None  # snapshot | image | dockerfile
    name: str | None = None
    image: str | None = None
    cpus: float | None = None
    memory: str | None = None
    network: bool | None = None
    id: str | None = None
    pool: str | None = None  # "hit": claimed from the warm pool; "miss": a pool is set, none matched


class RunRecord(BaseModel):
    trajectory_id: str
    collection: str
    task: str
    status: RunStatus = RunStatus.pending
    success: bool | None = None
    error: RunError | None = None
    init_params: dict[str, Any] = Field(default_factory=dict)
    steps: list[StepRecord] = Field(default_factory=list)
    results_files: list[ResultFile] = Field(default_factory=list)
    primary_files: list[str] = Field(default_factory=list)
    checks: list[CheckResult] = Field(default_factory=list)
    eval: dict[str, Any] | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    storage_path: str | None = None
    sandbox: SandboxRecord = Field(default_factory=SandboxRecord)
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration_seconds: float | None = None
    triggered_by_routine_id: int | None = None  # the routine that started it, if one did

    def step(self, name: str) -> StepRecord:
        for step in self.steps:
            if step.name == name:
                return step
        step = StepRecord(name=name)
        self.steps.append(step)
        return step

    @classmethod
    def new(cls, trajectory_id: str, collection: str, task: str, **kw: Any) -> RunRecord:
        return cls(
            trajectory_id=trajectory_id,
            collection=collection,
            task=task,
            steps=[StepRecord(name=s) for s in STAGES],
            **kw,
        )
