"""A task: {init_params, steps, step_configs}."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

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


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")

    init_params: dict[str, Any] = Field(default_factory=dict)
    steps: list[str] = Field(default_factory=lambda: ["run"])
    step_configs: dict[str, StepConfig] = Field(default_factory=lambda: {"run": StepConfig()})

    @field_validator("steps")
    @classmethod
    def _only_run(cls, steps: list[str]) -> list[str]:
        if steps != ["run"]:
            raise ValueError('pier runs tasks with steps ["run"]; other step lists are not supported')
        return steps

    def run_step(self) -> StepConfig:
        return self.step_configs.get("run") or StepConfig()


# The activities pier runs (a workflow step's `activity`), each with its config.
ACTIVITIES: dict[str, type[BaseModel]] = {"runbook": StepConfig}
ACTIVITY_DESCRIPTIONS = {
    "runbook": "runs an AI agent on a RUNBOOK.md in an isolated sandbox; results in /app/results",
}


def unknown_activity(data: Any) -> tuple[str, str] | None:
    """(field, message) for the first step config of a workflow JSON whose
    activity pier does not run; None when every one is known."""
    configs = data.get("step_configs") if isinstance(data, dict) else None
    if not isinstance(configs, dict):
        return None
    for step, config in configs.items():
        activity = config.get("activity", "runbook") if isinstance(config, dict) else None
        if activity not in ACTIVITIES:
            known = ", ".join(sorted(ACTIVITIES))
            return (
                f"step_configs.{step}.activity",
                f"activity {activity!r} is not one pier runs (pier has: {known}); "
                "make the step a runbook step, or run this workflow on the platform",
            )
    return None
