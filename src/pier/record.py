"""The run record, shaped as the platform's `Trajectory`: one pydantic model
family, stored by the store, printed by `pier run --json`, served by the API.

A runbook task has one workflow step, `run` (`steps.run`, activity
`runbook`): its `inputs` are the resolved parameters (secrets never), its
`outputs` what the run made and how it went, and `outputs.stages` pier's own
lifecycle stages (prepare ... save), which `pier runs`, `pier logs` and the
live log follow. `error` is the first failure's message and `failed_stage`
the stage it happened in.

Labels live in their own table (they can be added while a run is running);
the store attaches them when it reads a run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from pier import names

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
RUN_STEP = "run"  # the workflow step of a runbook task
RUNBOOK_ACTIVITY = "runbook"
AUTHOR = "pier"


def utcnow() -> datetime:
    return datetime.now(UTC)


def storage_key(collection: str, task: str, trajectory_id: str, *parts: str) -> str:
    """Where a run's files are, as `GET /api/v1/file/{key}` takes it."""
    return "/".join((collection, task, trajectory_id, *parts))


class RunStatus(StrEnum):
    pending = "pending"
    running = "running"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"
    archived = "archived"

    @property
    def terminal(self) -> bool:
        return self not in (RunStatus.pending, RunStatus.running)


class StageStatus(StrEnum):
    pending = "pending"
    running = "running"
    completed = "completed"
    failed = "failed"
    skipped = "skipped"


class StageRecord(BaseModel):
    """One of pier's lifecycle stages of a run."""

    name: str
    status: StageStatus = StageStatus.pending
    started: datetime | None = None
    ended: datetime | None = None
    duration_seconds: float | None = None
    detail: str | None = None


class ResultFile(BaseModel):
    path: str = Field(description="relative to the run's results folder")
    content_type: str
    extension: str
    size: int
    key: str | None = Field(None, description="storage key: GET /api/v1/file/{key}")


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
    # Kept after the run (docs/sessions.md): swept after kept_until (Unix time)
    # unless a run continues in it first; continued_by is that run.
    kept_until: float | None = None
    continued_by: str | None = None


class Label(BaseModel):
    key: str
    value: str
    created: datetime = Field(default_factory=utcnow)
    author: str = AUTHOR


class TrajectoryAttribute(BaseModel):
    asset_type: str = "trajectory"
    asset_filename: str = "run.json"
    created: datetime = Field(default_factory=utcnow)
    params: dict[str, Any] = Field(default_factory=dict)


class StepOutputs(BaseModel):
    """What a runbook step produced. Other keys are kept (an ingested run's
    `output`, a workflow's own outputs)."""

    model_config = ConfigDict(extra="allow")

    files: list[str] = Field(default_factory=list, description="storage keys of the result files")
    results_files: list[ResultFile] = Field(default_factory=list)
    primary_files: list[str] = Field(default_factory=list)
    success: bool | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    eval: dict[str, Any] | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    agent: str | None = None
    model: str | None = None
    stages: list[StageRecord] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    sandbox: SandboxRecord = Field(default_factory=SandboxRecord)


class Step(BaseModel):
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: StepOutputs = Field(default_factory=StepOutputs)
    activity: str = RUNBOOK_ACTIVITY
    key: str = RUN_STEP
    depends_on: list[str] = Field(default_factory=list)
    created: datetime = Field(default_factory=utcnow)
    ended: datetime | None = None
    duration_seconds: float | None = None
    author: str = AUTHOR
    origin: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)


class Trajectory(BaseModel):
    """A run. `name` is the task's name; `workflow_id` is derived."""

    name: str
    collection: str
    trajectory_id: str
    storage_path: str = ""
    status: RunStatus = RunStatus.pending
    attributes: TrajectoryAttribute = Field(default_factory=TrajectoryAttribute)
    created: datetime = Field(default_factory=utcnow)
    updated: datetime = Field(default_factory=utcnow)
    author: str = AUTHOR
    metadata_uri: str = ""
    steps: dict[str, Step] = Field(default_factory=dict)
    labels: list[Label] = Field(default_factory=list)
    total_steps: list[str] = Field(default_factory=list)
    completed_steps: list[str] = Field(default_factory=list)
    init_params: dict[str, Any] = Field(default_factory=dict)
    step_configs: dict[str, Any] = Field(default_factory=dict)
    org_id: str | None = None
    error: str | None = None
    failed_stage: str | None = None
    webhook_url: str | None = None
    started: datetime | None = None
    ended: datetime | None = None
    duration_seconds: float | None = None
    triggered_by_routine_id: int | None = None  # the routine that started it, if one did
    trace_id: str | None = None  # its OpenTelemetry trace, when the server exports traces
    parent: str | None = None  # the run whose kept sandbox this one continued in (continue_from)
    # "host:pid:start" of the process running the run (pier.sandbox.sweeper.owner_label):
    # a run whose owner is gone is ended by whoever notices (lifecycle/orphans.py).
    # Stored, never served: it is the host's business, not a client's.
    owner: str | None = Field(default=None, exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def workflow_id(self) -> str:
        """The platform's run id: <collection>-<task>--<trajectory_id>."""
        return names.workflow_id(self.collection, self.name, self.trajectory_id)

    # pier's own view of a runbook run

    @property
    def task(self) -> str:
        return self.name

    @property
    def run(self) -> Step:
        """The runbook step (created on first use)."""
        step = self.steps.get(RUN_STEP)
        if step is None:
            step = self.steps[RUN_STEP] = Step(created=self.created)
        return step

    @property
    def outputs(self) -> StepOutputs:
        return self.run.outputs

    @property
    def stages(self) -> list[StageRecord]:
        return self.outputs.stages

    @property
    def success(self) -> bool | None:
        step = self.steps.get(RUN_STEP)
        return None if step is None else step.outputs.success

    def stage(self, name: str) -> StageRecord:
        for stage in self.outputs.stages:
            if stage.name == name:
                return stage
        stage = StageRecord(name=name)
        self.outputs.stages.append(stage)
        return stage

    def fail(self, stage: str, message: str) -> None:
        """Record the run's first failure; later ones stay on their stages only."""
        if self.error is None:
            self.error, self.failed_stage = message, stage

    def result_key(self, path: str) -> str:
        return storage_key(self.collection, self.name, self.trajectory_id, "results", path)

    def set_results(self, files: list[ResultFile], primary: list[str]) -> None:
        keyed = [f.model_copy(update={"key": self.result_key(f.path)}) for f in files]
        self.outputs.results_files = keyed
        self.outputs.primary_files = primary
        self.outputs.files = [f.key for f in keyed if f.key]

    def finish(self, status: RunStatus, ended: datetime, duration_seconds: float | None) -> None:
        """Close the run and its step: status, success, times, completed steps."""
        self.status = status
        self.ended = ended
        self.duration_seconds = duration_seconds
        outputs = self.outputs
        outputs.success = status == RunStatus.completed and all(c.passed for c in outputs.checks)
        self.run.ended, self.run.duration_seconds = ended, duration_seconds
        self.completed_steps = [RUN_STEP] if status == RunStatus.completed else []

    @classmethod
    def new(
        cls,
        trajectory_id: str,
        collection: str,
        task: str,
        *,
        init_params: dict[str, Any] | None = None,
        step_config: dict[str, Any] | None = None,
        **kw: Any,
    ) -> Trajectory:
        """A pending runbook run with its step and every stage pending;
        `init_params` are the run's (secrets already masked)."""
        init_params = init_params or {}
        step_config = step_config or {}
        record = cls(
            trajectory_id=trajectory_id,
            collection=collection,
            name=task,
            storage_path=storage_key(collection, task, trajectory_id),
            metadata_uri=storage_key(collection, task, trajectory_id, "run.json"),
            init_params=init_params,
            step_configs={RUN_STEP: step_config},
            total_steps=[RUN_STEP],
            **kw,
        )
        record.steps[RUN_STEP] = Step(
            inputs=init_params,
            created=record.created,
            config=step_config,
            outputs=StepOutputs(stages=[StageRecord(name=s) for s in STAGES]),
        )
        return record

    def stored(self) -> dict[str, Any]:
        """The JSON the store keeps: labels and the derived id are not in it."""
        return {**self.model_dump(mode="json", exclude={"labels", "workflow_id"}), "owner": self.owner}
