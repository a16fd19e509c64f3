"""A task: {init_params, steps, step_configs} (SPEC 5)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_MEMORY = re.compile(r"^\d+(\.\d+)?\s*([kmgt]i?b?|b)?$", re.I)

# init_params keys pier reads; others are kept and reported.
KNOWN_INIT_PARAMS = frozenset(
    {
        "instruction", "agent", "model", "model_provider", "snapshot", "image", "vars",
        "file_paths", "base_image", "apt_packages", "pip_packages", "checks",
        "checks_isolation", "primary_outputs", "secrets", "mcp_servers", "webhook_url",
        "webhook_secret", "timeout_sec", "cpus", "memory", "network_enabled",
        "model_budget", "network",
    }
)  # fmt: skip


def check_memory(value: str | None) -> str | None:
    if value is not None and not _MEMORY.match(value.strip()):
        raise ValueError(f"'{value}' is not a memory size; write it like 512M, 8G or 16G")
    return value


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
    cpus: float | None = Field(None, gt=0)
    memory: str | None = None
    timeout_sec: int | None = Field(None, gt=0)
    network_enabled: bool | None = None

    _memory = field_validator("memory")(classmethod(lambda cls, v: check_memory(v)))


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
