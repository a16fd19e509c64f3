"""What the services take and answer as models: a run's parameters, a label,
a task's change, a finished run made elsewhere, a task's figures, an
experiment's summary. They know no HTTP; the API's routes use them as their
bodies (pier.api.schemas names them too) and the web UI renders what they hold."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from pier.experiments.service import Experiment
from pier.record import RunStatus

# The subscription credentials a run may name, written once: the body's type and
# the multipart form's schema read them here (the dispatcher maps those it runs).
SubscriptionCredential = Literal["anthropic", "codex", "nous"]
SUBSCRIPTION_CREDENTIALS: tuple[str, ...] = get_args(SubscriptionCredential)

SecretParams = dict[str, str]


class RunCreate(BaseModel):
    """A run's parameters as JSON. The same fields come as multipart form fields
    (init_params and secret_params as JSON strings) with repeatable `files`."""

    model_config = ConfigDict(extra="forbid")

    init_params: dict[str, Any] = Field(
        default_factory=dict,
        description="merged into the task's init_params per top-level key",
    )
    secret_params: SecretParams = Field(
        default_factory=dict,
        description="environment variables for this run only; never stored or returned",
    )
    webhook_url: str | None = Field(None, description="POSTed the run record when the run ends")
    webhook_secret: str | None = Field(None, description="signs the webhook (X-Pier-Signature)")
    use_trial_keys: bool = Field(
        False,
        description="fill missing provider keys from the server's trial keys (counts against the budget)",
    )
    subscription_credential: SubscriptionCredential | None = Field(
        None,
        description="run on that provider's own API (anthropic, or codex = openai) with the collection's key; "
        "nous is not available on pier",
    )


KEY_PATTERN = r"^\S(.{0,253}\S)?$"


class LabelCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=255, pattern=KEY_PATTERN, description="e.g. eval.grade")
    value: str = Field("", max_length=65536)
    author: str | None = Field(None, max_length=255)


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


WORKFLOW_DOC = "the task JSON ({init_params, steps, step_configs}) or a RUNBOOK.md's text"


class TaskUpdate(BaseModel):
    """Either field may be left out; a missing one is kept."""

    model_config = ConfigDict(extra="forbid")

    workflow: dict[str, Any] | str | None = Field(None, description=WORKFLOW_DOC)
    description: str | None = None


ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


MAX_ENV_VALUE = 64 * 1024


class ExperimentPublic(BaseModel):
    id: str
    collection: str
    name: str
    task: str = Field(description="the task its runs are of (the experiment's name for a runbook)")
    status: str = Field(description="running, completed, cancelled, or stopped (a budget was reached)")
    reason: str | None = Field(None, description="why it stopped")
    created_at: datetime
    ended_at: datetime | None
    cells: int
    attempts: int
    runs_total: int = Field(description="cells x attempts")
    definition: dict[str, Any]
    results: dict[str, Any] | None = Field(
        None, description="per cell, per axis, in total, and comparisons (the single read includes it)"
    )

    @classmethod
    def of(cls, experiment: Experiment, results: dict[str, Any] | None = None) -> ExperimentPublic:
        stored = experiment.stored
        return cls(
            id=stored.id, collection=stored.collection, name=stored.name, task=stored.task,
            status=stored.status, reason=stored.reason, created_at=stored.created_at,
            ended_at=stored.ended_at, cells=len(experiment.cells), attempts=experiment.spec.attempts,
            runs_total=experiment.total_runs, definition=stored.definition, results=results,
        )  # fmt: skip
