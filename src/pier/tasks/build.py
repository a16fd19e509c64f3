"""A runbook becomes a task: frontmatter -> init_params. Settings are not read
here: the caller passes the snapshot a runbook that names none gets."""

from __future__ import annotations

from typing import Any

from pier.runbook.parse import Runbook
from pier.settings import DEFAULT_SNAPSHOT
from pier.tasks.model import StepConfig, Task


def infer_agent(model: str | None) -> str | None:
    """The agent a model implies, or None."""
    if not model:
        return None
    name = model.lower()
    bare = name.split("/", 1)[1] if "/" in name else name
    if name.startswith("anthropic/") or bare.startswith("claude-"):
        return "claude-code"
    if name.startswith("openai/") or bare.startswith(("gpt-", "o1-", "o3-", "o4-")) or bare in (
        "o1", "o3", "o4-mini",
    ):  # fmt: skip
        return "codex"
    if name.startswith("gemini/") or bare.startswith("gemini-"):
        return "gemini-cli"
    return None


def task_from_runbook(runbook: Runbook, default_snapshot: str | None = DEFAULT_SNAPSHOT) -> Task:
    """The task a runbook describes; `default_snapshot` (the caller's
    settings.default_snapshot) when its frontmatter names no snapshot."""
    front = runbook.frontmatter
    snapshot = front.snapshot if front.snapshot is not None else default_snapshot
    params: dict[str, Any] = {
        "instruction": runbook.text,
        "agent": front.agent or infer_agent(front.model),
        "model": front.model,
        "model_provider": front.model_provider,
        "snapshot": snapshot,
        "vars": dict(front.vars),
        "file_paths": [],
    }
    for key in ("image", "base_image", "checks_isolation", "code_checks", "strict_evaluation"):
        if getattr(front, key):
            params[key] = getattr(front, key)
    for key in ("apt_packages", "pip_packages", "checks", "primary_outputs", "mcp_servers"):
        if getattr(front, key):
            params[key] = getattr(front, key)
    step = StepConfig(
        cpus=front.cpus,
        memory=front.memory,
        timeout_sec=front.timeout_sec,
        network_enabled=front.network_enabled,
    )
    return Task(init_params=params, steps=["run"], step_configs={"run": step})
