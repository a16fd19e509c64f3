"""The run record, shaped as the platform's `Trajectory`: one pydantic model
family, stored by the store, printed by `pier run --json`, served by the API.

A runbook task has one workflow step, `run` (`steps.run`, activity
`runbook`): its `inputs` are the resolved parameters (secrets never), its
`outputs` what the run made and how it went, and `outputs.stages` pier's own
lifecycle stages (prepare ... save), which `pier runs`, `pier logs` and the
live log follow. `error` is the first failure's message, `failed_stage`
the stage it happened in and `outcome` how the run ended (pier.lifecycle.outcomes).

Labels live in their own table (they can be added while a run is running);
the store attaches them when it reads a run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

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


CHECK_STATUSES = ("pass", "fail", "error", "skipped")


class CheckResult(BaseModel):
    """One check's result. `status`, `kind`, `runner`, `title` and `message` came
    with the platform's evaluation report v2 (docs/runs.md); `passed` is
    status == pass, except that a skipped check does not fail a run either."""

    name: str
    type: str
    passed: bool
    exit_code: int | None = None
    output: str = ""
    duration_s: float = 0.0
    status: str | None = Field(None, description="pass | fail | error | skipped")
    kind: str = Field("code_check", description="the report entry's kind: code_check")
    runner: str = Field("jetty", description="who ran it: jetty (pier, after the agent) or agent")
    title: str | None = Field(None, description="a `## Code Checks` heading's name")
    message: str | None = Field(None, description="one line: what it found")

    @property
    def outcome(self) -> str:
        if self.status in CHECK_STATUSES:
            return self.status
        return "pass" if self.passed else "fail"

    @property
    def failing(self) -> bool:
        return self.outcome in ("fail", "error")


class VolumeRecord(BaseModel):
    """A collection's named volume the run's sandbox mounted (docs/sessions.md#volumes)."""

    name: str  # in the collection, as the runbook's `volumes:` names it
    path: str  # where the sandbox saw it
    read_only: bool = False


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
    runtime: str | None = None  # the OCI runtime it ran under (runsc, runc), when the backend tells
    volumes: list[VolumeRecord] = Field(default_factory=list)  # the runbook's `volumes:` it mounted


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


class ActivityOutputs(BaseModel):
    """What a workflow step of another activity than runbook produced: its
    activity's keys only (`text`, `chunks`, `trajectory_references`, ...)."""

    model_config = ConfigDict(extra="allow")


class Step(BaseModel):
    """One workflow step. A runbook step's outputs are StepOutputs; another
    activity's its own keys (ActivityOutputs). `status` and `error` are a
    workflow step's (a runbook step's are the run's: `status`, `error`)."""

    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: StepOutputs | ActivityOutputs = Field(default_factory=StepOutputs)
    activity: str = RUNBOOK_ACTIVITY
    key: str = RUN_STEP
    depends_on: list[str] = Field(default_factory=list)
    created: datetime = Field(default_factory=utcnow)
    ended: datetime | None = None
    duration_seconds: float | None = None
    author: str = AUTHOR
    origin: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    status: StageStatus | None = None
    error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _outputs_of_activity(cls, data: Any) -> Any:
        # a workflow's step (it has a status; a runbook's or an ingested run's has none)
        if isinstance(data, dict) and data.get("status") is not None:
            outputs = data.get("outputs")
            if isinstance(outputs, dict):
                data = {**data, "outputs": ActivityOutputs.model_validate(outputs)}
        return data


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
    # How the run ended, one label of pier.lifecycle.outcomes.Outcome (success,
    # checks_failed, timed_out, provider_refused, infra, ...): what experiments,
    # metrics and traces count by. None while it runs, and on records older than it.
    outcome: str | None = None
    webhook_url: str | None = None
    started: datetime | None = None
    ended: datetime | None = None
    duration_seconds: float | None = None
    triggered_by_routine_id: int | None = None  # the routine that started it, if one did
    # A fan-out's child (list_emit_await): the run and the step that started it.
    parent_trajectory_id: str | None = None
    # A workflow's model usage, summed over its steps (a runbook run's is steps.run.outputs.usage).
    usage: dict[str, Any] = Field(default_factory=dict)
    parent_task: str | None = None
    parent_step: str | None = None
    trace_id: str | None = None  # its OpenTelemetry trace, when the server exports traces
    parent: str | None = None  # the run whose kept sandbox this one continued in (continue_from)
    # "host:pid:start" of the process running the run (pier.sandbox.owner.owner_label):
    # a run whose owner is gone is ended by whoever notices (lifecycle/orphans.py).
    # Stored, never served: it is the host's business, not a client's.
    owner: str | None = Field(default=None, exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def state(self) -> RunState:
        """How the run stands, in words, derived from the record (never stored):
        what the web UI, `pier run`'s summary and the API all say."""
        return run_state(self)

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
            if self.is_workflow:  # a workflow has no runbook step: an empty one, not added
                return Step(created=self.created)
            step = self.steps[RUN_STEP] = Step(created=self.created)
        return step

    @property
    def outputs(self) -> StepOutputs:
        outputs = self.run.outputs
        # a workflow's step named run has its activity's outputs: a runbook view of it is empty
        return outputs if isinstance(outputs, StepOutputs) else StepOutputs()

    @property
    def is_workflow(self) -> bool:
        """Its steps are a workflow's (pier.tasks.workflow), not one runbook step."""
        return any(step.status is not None for step in self.steps.values())

    @property
    def stages(self) -> list[StageRecord]:
        """pier's lifecycle stages of a runbook run (a workflow has none)."""
        return [] if self.is_workflow else self.outputs.stages

    @property
    def success(self) -> bool | None:
        if self.is_workflow:  # every step that ran completed
            return None if not self.status.terminal else self.status == RunStatus.completed
        outputs = _runbook_outputs(self)
        return None if outputs is None else outputs.success

    def stage(self, name: str) -> StageRecord:
        for stage in self.outputs.stages:
            if stage.name == name:
                return stage
        stage = StageRecord(name=name)
        self.outputs.stages.append(stage)
        return stage

    def fail(self, stage: str, message: str, outcome: str | None = None) -> None:
        """Record the run's first failure (and its outcome); later ones stay on
        their stages only."""
        if self.error is None:
            self.error, self.failed_stage, self.outcome = message, stage, outcome

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
        if self.is_workflow:
            for step in self.steps.values():
                if step.status in (StageStatus.pending, StageStatus.running):
                    step.status = (
                        StageStatus.skipped if step.status == StageStatus.pending else StageStatus.failed
                    )
            done = [
                n
                for n in self.total_steps
                if n in self.steps and self.steps[n].status == StageStatus.completed
            ]
            self.completed_steps = done
            return
        outputs = self.outputs
        # The merged evaluation report decides when there is one (docs/runs.md): a
        # failed or errored entry of any kind fails the run; else the checks do.
        verdict = (outputs.eval or {}).get("passed")
        outputs.success = (
            status == RunStatus.completed
            and not any(c.failing for c in outputs.checks)
            and verdict is not False
        )
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

    @classmethod
    def new_workflow(
        cls,
        trajectory_id: str,
        collection: str,
        task_name: str,
        task: Any,
        init_params: dict[str, Any],
        **kw: Any,
    ) -> Trajectory:
        """A pending workflow run (task: a pier.tasks.Task whose is_workflow), each step pending."""
        configs = {name: task.step_config(name) for name in task.steps}
        record = cls(
            trajectory_id=trajectory_id,
            collection=collection,
            name=task_name,
            storage_path=storage_key(collection, task_name, trajectory_id),
            metadata_uri=storage_key(collection, task_name, trajectory_id, "run.json"),
            init_params=init_params,
            step_configs=configs,
            total_steps=list(task.steps),
            **kw,
        )
        for i, name in enumerate(task.steps):
            record.steps[name] = Step(
                activity=configs[name]["activity"], key=name, config=configs[name], outputs=ActivityOutputs(),
                depends_on=list(task.steps[:i]), status=StageStatus.pending, created=record.created,
            )  # fmt: skip
        return record

    def stored(self) -> dict[str, Any]:
        """The JSON the store keeps: labels and the derived id are not in it."""
        dumped = self.model_dump(mode="json", exclude={"labels", "workflow_id", "state"})
        return {**dumped, "owner": self.owner}


# A run's state in words: one derivation for every viewer (the web UI, the
# CLI's summary, the API's `state`), from the record alone. It reads stages by
# name and ignores what it does not know, so fields added to the record later
# change nothing here.

BEFORE_AGENT = ("prepare", "create", "setup")  # a failure here: the agent never started


class StageState(BaseModel):
    name: str
    status: str  # a StageStatus value
    detail: str | None = None


class RunState(BaseModel):
    summary: str = Field(
        description="the run's state in one line, e.g. 'not started (pre-flight failed: ...)'"
    )
    checks: str = Field(
        description="'no checks', 'checks skipped (why)', 'checks not run yet', or 'N/M checks passed'"
    )
    agent_started: bool
    stages: list[StageState] = Field(default_factory=list, description="each stage's state, as it is shown")


def _runbook_outputs(record: Trajectory) -> StepOutputs | None:
    """The runbook step's outputs; None without one: none yet, or a workflow's
    step named run (its outputs are its activity's, with no stages or checks)."""
    step = record.steps.get(RUN_STEP)
    return step.outputs if step is not None and isinstance(step.outputs, StepOutputs) else None


def run_state(record: Trajectory) -> RunState:
    outputs = _runbook_outputs(record)
    stages = list(outputs.stages) if outputs is not None else []
    agent = next((s for s in stages if s.name == "run_agent"), None)
    agent_started = agent is not None and agent.status not in (StageStatus.pending, StageStatus.skipped)
    return RunState(
        summary=_summary(record, stages, agent_started),
        checks=_checks_state(record, stages),
        agent_started=agent_started,
        stages=[_stage_state(s, record, agent_started) for s in stages],
    )


def _summary(record: Trajectory, stages: list[StageRecord], agent_started: bool) -> str:
    status = record.status
    if status == RunStatus.pending:
        return "waiting to start"
    if status == RunStatus.running:
        current = next((s.name for s in stages if s.status == StageStatus.running), None)
        return f"running ({current})" if current else "running"
    error = record.error or ""
    if status == RunStatus.cancelled:
        where = f" during {record.failed_stage}" if record.failed_stage else ""
        return f"cancelled{where}" + ("" if agent_started else " (the agent was not started)")
    if status == RunStatus.failed and record.failed_stage in BEFORE_AGENT and not agent_started:
        return f"not started (pre-flight failed: {record.failed_stage}: {error})"
    if status == RunStatus.failed:
        return f"failed at {record.failed_stage}: {error}" if record.failed_stage else f"failed: {error}"
    if status == RunStatus.completed and record.success is False:
        outputs = _runbook_outputs(record)
        failing = outputs is not None and any(c.failing for c in outputs.checks)
        verdict = ((outputs.eval or {}) if outputs is not None else {}).get("passed")
        if not failing and verdict is False:
            return "completed; the evaluation report (validation_report.json) did not pass"
        return f"completed; {_checks_state(record, stages)}"
    return status.value


def _declares_checks(record: Trajectory) -> bool | None:
    """Whether the run's runbook had checks: None when the record cannot tell."""
    step = record.steps.get(RUN_STEP)
    inputs = step.inputs if step else {}
    if inputs.get("checks"):
        return True
    instruction = inputs.get("instruction")
    if "checks" in inputs and isinstance(instruction, str) and "## Code Checks" not in instruction:
        return False
    return None


def _checks_state(record: Trajectory, stages: list[StageRecord]) -> str:
    outputs = _runbook_outputs(record)
    results = outputs.checks if outputs is not None else []
    if results:
        outcomes = [c.outcome for c in results]
        others = [f"{outcomes.count(o)} {'failed' if o == 'fail' else o}" for o in ("fail", "error", "skipped")
                  if o in outcomes]  # fmt: skip
        return f"{outcomes.count('pass')}/{len(results)} checks passed" + (
            f" ({', '.join(others)})" if others else ""
        )
    check = next((s for s in stages if s.name == "check"), None)
    declared = _declares_checks(record)
    if declared is False:
        return "no checks"
    if check is None or check.status == StageStatus.completed:
        return "no checks"
    if check.status in (StageStatus.pending, StageStatus.running) and not record.status.terminal:
        return "checks not run yet"
    if record.status == RunStatus.cancelled:
        why = "the run was cancelled"
    elif record.failed_stage:
        why = f"the run failed at {record.failed_stage}"
    else:
        why = check.detail or "the check stage did not run"
    return f"checks skipped ({why})"


def _stage_state(stage: StageRecord, record: Trajectory, agent_started: bool) -> StageState:
    """A stage as shown: after a pre-flight failure, the stages past it say the
    agent never started rather than what they found missing for that reason."""
    status, detail = stage.status.value, stage.detail
    after_agent = stage.name not in BEFORE_AGENT and stage.name != "run_agent"
    if not agent_started and record.failed_stage in BEFORE_AGENT and stage.name != record.failed_stage:
        if stage.name == "run_agent":
            status, detail = StageStatus.skipped.value, f"not started: {record.failed_stage} failed"
        elif after_agent and stage.status == StageStatus.failed:
            detail = f"nothing to collect: the agent was not started ({record.failed_stage} failed)"
    return StageState(name=stage.name, status=status, detail=detail)
