"""A task: {init_params, steps, step_configs}."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from pier.limits import check_cpus, check_memory, check_timeout

# init_params keys pier reads; others are kept and reported.
KNOWN_INIT_PARAMS = frozenset(
    {
        "instruction", "agent", "model", "model_provider", "snapshot", "image", "vars",
        "file_paths", "base_image", "apt_packages", "pip_packages", "checks",
        "checks_isolation", "primary_outputs", "secrets", "mcp_servers", "webhook_url",
        "webhook_secret", "timeout_sec", "cpus", "memory", "network_enabled",
        "model_budget", "network", "allow_extra_vars", "allow_unfilled_vars", "code_checks",
        "strict_evaluation", "keep_sandbox", "continue_from",
    }
)  # fmt: skip


def optional(check: Any) -> Any:
    """A field validator (mode="before") that checks a limit unless it is unset."""
    return classmethod(lambda cls, value: None if value is None else check(value))


class StepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    activity: Literal["runbook"] = "runbook"
    agent_path: str = "init_params.agent"
    model_path: str = "init_params.model"
    model_provider_path: str = "init_params.model_provider"
    snapshot_path: str = "init_params.snapshot"
    instruction_path: str = "init_params.instruction"
    template_variables_path: str = "init_params.vars"
    files_path: str = "init_params.file_paths"
    cpus: float | None = None
    memory: str | None = None
    timeout_sec: int | None = None
    network_enabled: bool | None = None

    _cpus = field_validator("cpus", mode="before")(optional(check_cpus))
    _memory = field_validator("memory", mode="before")(optional(check_memory))
    _timeout = field_validator("timeout_sec", mode="before")(optional(check_timeout))


class ActivityStep(BaseModel):
    """A workflow step of any activity but runbook: its parameters are checked
    against the activity's (pier.tasks.workflow) when the task is."""

    model_config = ConfigDict(extra="allow")

    activity: str


def _kind(config: Any) -> str:
    activity = (
        config.get("activity", "runbook")
        if isinstance(config, dict)
        else getattr(config, "activity", "runbook")
    )
    return "runbook" if activity == "runbook" else "activity"


AnyStep = Annotated[
    Annotated[StepConfig, Tag("runbook")] | Annotated[ActivityStep, Tag("activity")], Discriminator(_kind)
]


def _one_runbook_step() -> dict[str, StepConfig | ActivityStep]:
    return {"run": StepConfig()}


class Task(BaseModel):
    """A runbook task (steps ["run"], one runbook step), or a workflow: steps of
    the catalogue's activities run in order (pier.tasks.workflow)."""

    model_config = ConfigDict(extra="forbid")

    init_params: dict[str, Any] = Field(default_factory=dict)
    steps: list[str] = Field(default_factory=lambda: ["run"])
    step_configs: dict[str, AnyStep] = Field(default_factory=_one_runbook_step)

    @model_validator(mode="after")
    def _runbook_or_workflow(self) -> Task:
        if self.is_workflow:
            from pier.tasks.workflow import check_workflow, raise_problems

            configs = {name: config.model_dump() for name, config in self.step_configs.items()}
            raise_problems(check_workflow(self.steps, configs))
        elif self.steps != ["run"]:
            raise ValueError('a runbook task has steps ["run"]')
        return self

    @property
    def is_workflow(self) -> bool:
        """Not a runbook task: its steps are the catalogue's activities."""
        run = self.step_configs.get("run")
        return not (self.steps == ["run"] and (run is None or isinstance(run, StepConfig)))

    def run_step(self) -> StepConfig:
        run = self.step_configs.get("run")
        return run if isinstance(run, StepConfig) else StepConfig()

    def step_config(self, name: str) -> dict[str, Any]:
        """A workflow step's config as given (activity and parameters)."""
        return self.step_configs[name].model_dump(mode="json")


def unknown_activity(data: Any) -> tuple[str, str] | None:
    """(field, message) for the first step config of a workflow JSON whose
    activity pier does not run; None when every one is known."""
    configs = data.get("step_configs") if isinstance(data, dict) else None
    if not isinstance(configs, dict):
        return None
    from pier.tasks.workflow import ACTIVITIES

    for step, config in configs.items():
        activity = config.get("activity", "runbook") if isinstance(config, dict) else None
        if activity not in ACTIVITIES:
            known = ", ".join(ACTIVITIES)
            return (
                f"step_configs.{step}.activity",
                f"activity {activity!r} is not one pier runs (pier has: {known}); "
                "docs/workflows.md lists each with an example",
            )
    return None
