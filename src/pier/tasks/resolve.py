"""Merge a run's init_params into a task's and resolve the run step."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pier.errors import TaskError
from pier.runbook.model import Frontmatter
from pier.runbook.parse import parse
from pier.tasks.model import KNOWN_INIT_PARAMS, StepConfig, Task

# Frontmatter keys that fill init_params a task does not set itself.
_FROM_FRONTMATTER = (
    "agent", "model", "model_provider", "snapshot", "image", "base_image", "apt_packages",
    "pip_packages", "checks", "checks_isolation", "primary_outputs", "mcp_servers",
    "model_budget", "network", "code_checks", "strict_evaluation",
)  # fmt: skip


# Settings blocks a run overrides key by key: the platform's `code_checks:` is a task
# default "a run may override per key" (a run sending {"timeout_sec": 60} keeps the
# task's sources and executor).
_MERGED_PER_KEY = ("code_checks",)


def merge_init_params(task: Mapping[str, Any], run: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per top-level key: a key the run sends replaces the task's whole value,
    except the settings blocks of _MERGED_PER_KEY, merged one level down."""
    merged = dict(task)
    for key, value in (run or {}).items():
        merged[key] = _per_key(merged.get(key), value) if key in _MERGED_PER_KEY else value
    return merged


def _per_key(default: Any, given: Any) -> Any:
    """`given`'s keys over `default`'s when both are mappings; else `given` (a
    malformed value is left for the plan to refuse, naming it)."""
    if isinstance(default, Mapping) and isinstance(given, Mapping):
        return {**default, **given}
    return given


def lookup(expression: str, context: Mapping[str, Any]) -> Any:
    """Resolve a dotted path such as `init_params.agent`; missing parts give None."""
    value: Any = context
    for part in expression.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


@dataclass(frozen=True)
class ResolvedStep:
    """The run step with every path expression and default applied."""

    instruction: str
    body: str
    frontmatter: Frontmatter
    agent: str | None
    model: str | None
    model_provider: str | None
    snapshot: str | None
    image: str | None
    base_image: str | None
    apt_packages: tuple[str, ...]
    pip_packages: tuple[str, ...]
    vars: dict[str, Any]
    file_paths: tuple[str, ...]
    checks: tuple[dict[str, Any], ...]
    checks_isolation: str | None
    primary_outputs: tuple[str, ...]
    mcp_servers: dict[str, Any]
    secrets: dict[str, Any]
    cpus: float | None  # the task's limits: its step_configs, else its runbook's
    memory: str | None
    timeout_sec: int | None
    network_enabled: bool | None
    init_params: dict[str, Any]
    warnings: tuple[str, ...] = field(default=())
    model_budget: dict[str, Any] = field(default_factory=dict)
    network: dict[str, Any] | None = None
    # The limits init_params ask for (run and task init_params merged): they may
    # lower the task's limits above, never raise them (pier.limits.run_limits).
    asked_limits: dict[str, Any] = field(default_factory=dict)
    # Keep the sandbox after the run (init_params.keep_sandbox); run in the kept
    # sandbox of an earlier run (init_params.continue_from): docs/sessions.md.
    keep_sandbox: Any = None
    continue_from: Any = None
    code_checks: Any = None  # the platform's `code_checks:` (checked by the plan)
    strict_evaluation: bool = False


def resolve(task: Task, run_params: Mapping[str, Any] | None = None) -> ResolvedStep:
    params = merge_init_params(task.init_params, run_params)
    step = task.run_step()
    context = {"init_params": params}
    instruction = _text(lookup(step.instruction_path, context), step.instruction_path)
    runbook = parse(instruction)
    front = runbook.frontmatter
    for key in _FROM_FRONTMATTER:
        if key in _MERGED_PER_KEY and key in params:
            params[key] = _per_key(getattr(front, key), params[key])
        params.setdefault(key, getattr(front, key))

    def get(path: str) -> Any:
        return lookup(path, context)

    return ResolvedStep(
        instruction=instruction,
        body=runbook.body,
        frontmatter=front,
        agent=get(step.agent_path),
        model=get(step.model_path),
        model_provider=get(step.model_provider_path),
        snapshot=get(step.snapshot_path),
        image=params.get("image") or None,
        base_image=params.get("base_image") or None,
        apt_packages=tuple(_list(params.get("apt_packages"), "apt_packages")),
        pip_packages=tuple(_list(params.get("pip_packages"), "pip_packages")),
        vars={**front.vars, **_mapping(get(step.template_variables_path), "vars")},
        file_paths=tuple(_list(get(step.files_path), "file_paths")),
        checks=tuple(_list(params.get("checks"), "checks")),
        checks_isolation=params.get("checks_isolation"),
        primary_outputs=tuple(_list(params.get("primary_outputs"), "primary_outputs")),
        mcp_servers=_mapping(params.get("mcp_servers"), "mcp_servers"),
        secrets={k: v.model_dump() for k, v in front.secrets.items()},
        cpus=_first(step.cpus, front.cpus),
        memory=_first(step.memory, front.memory),
        timeout_sec=_first(step.timeout_sec, front.timeout_sec),
        network_enabled=_first(step.network_enabled, params.get("network_enabled"), front.network_enabled),
        init_params=params,
        warnings=runbook.warnings + tuple(_unknown_params(params)),
        model_budget=_mapping(params.get("model_budget"), "model_budget"),
        network=_mapping(params["network"], "network") if params.get("network") is not None else None,
        asked_limits={key: params[key] for key in LIMIT_KEYS if params.get(key) is not None},
        keep_sandbox=params.get("keep_sandbox"),
        continue_from=params.get("continue_from"),
        code_checks=params.get("code_checks"),
        strict_evaluation=bool(params.get("strict_evaluation")),
    )


LIMIT_KEYS = ("cpus", "memory", "timeout_sec")


def _first(*values: Any) -> Any:
    return next((value for value in values if value is not None), None)


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TaskError(f"the instruction ({path}) is empty: give the runbook's text")
    return value


def _list(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list | tuple):
        raise TaskError(f"init_params.{name} must be a list, got {type(value).__name__}")
    return list(value)


def _mapping(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TaskError(f"init_params.{name} must be an object, got {type(value).__name__}")
    return dict(value)


def _unknown_params(params: Mapping[str, Any]) -> list[str]:
    return [
        f"unknown init_params key '{key}' (kept, not used)" for key in params if key not in KNOWN_INIT_PARAMS
    ]


def step_override(step: StepConfig, **changes: Any) -> StepConfig:
    """A copy of the step with the given non-None limits replaced (CLI flags)."""
    update = {key: value for key, value in changes.items() if value is not None}
    return StepConfig.model_validate({**step.model_dump(), **update})
