"""The RUNBOOK.md frontmatter schema. Unknown keys are kept, not rejected."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from pier.limits import check_cpus, check_memory, check_timeout
from pier.runbook.volumes import VolumeDecl, check_volumes


class SecretDecl(BaseModel):
    model_config = ConfigDict(extra="allow")

    env: str | None = None
    description: str | None = None
    required: bool = False
    # `inject: header`: the sandbox gets a placeholder, pier's egress proxy puts the
    # value in request headers to `hosts` (checked when a run is planned).
    inject: Any = None
    hosts: Any = None
    # The platform's secret exposure (docs/runbook-format.md): whether the agent's
    # environment gets it (default: yes, unless a check source or MCP server names
    # it with `secret:`), and whether the checks pier runs get a withheld one.
    expose_to_agent: bool | None = None
    expose_to_checks: bool | None = None


def _as_list(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return value


class Frontmatter(BaseModel):
    """Known keys typed; anything else lands in model_extra and is reported."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    version: str | None = None
    evaluation: str | None = None
    agent: str | None = None
    model: str | None = None
    model_provider: str | None = None
    snapshot: str | None = None
    image: str | None = None
    primary_outputs: list[str] = Field(default_factory=list)
    secrets: dict[str, SecretDecl] = Field(default_factory=dict)
    origin: Any = None
    # The platform's checks settings: how `## Code Checks` run (pier.checks.platform).
    code_checks: dict[str, Any] | None = None
    strict_evaluation: bool | None = None
    # pier's own keys
    checks: list[dict[str, Any]] = Field(default_factory=list)
    checks_isolation: str | None = None
    timeout_sec: int | None = None
    cpus: float | None = None
    memory: str | None = None
    network_enabled: bool | None = None
    base_image: str | None = None
    apt_packages: list[str] = Field(default_factory=list)
    pip_packages: list[str] = Field(default_factory=list)
    vars: dict[str, Any] = Field(default_factory=dict)
    mcp_servers: dict[str, Any] = Field(default_factory=dict)
    model_budget: dict[str, Any] = Field(default_factory=dict)  # requests, tokens, cost_usd
    network: dict[str, Any] | None = None  # {allow: [names]}: egress through pier's proxy only
    # The collection's named volumes the run mounts: {name: {path, read_only}} (pier.runbook.volumes)
    volumes: dict[str, VolumeDecl] = Field(default_factory=dict)

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        return None if value is None else str(value)

    @field_validator("cpus", "memory", "timeout_sec", mode="before")
    @classmethod
    def _limit(cls, value: Any, info: ValidationInfo) -> Any:
        checks = {"cpus": check_cpus, "memory": check_memory, "timeout_sec": check_timeout}
        return None if value is None else checks[str(info.field_name)](value)

    @field_validator("primary_outputs", "apt_packages", "pip_packages", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return _as_list(value)

    @field_validator("secrets", "vars", "mcp_servers", "model_budget", mode="before")
    @classmethod
    def _empty_mapping(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator("volumes", mode="before")
    @classmethod
    def _volumes(cls, value: Any) -> Any:
        return check_volumes(value)

    @field_validator("checks", mode="before")
    @classmethod
    def _empty_list(cls, value: Any) -> Any:
        return [] if value is None else value

    @property
    def unknown_keys(self) -> list[str]:
        return sorted((self.model_extra or {}).keys())
