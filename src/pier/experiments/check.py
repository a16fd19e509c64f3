"""Refusing a matrix before any run starts: every field that cannot work is
found here, named, with the number of runs the experiment would have started.

What is checked without the collection: the agents are pier's, each provider
is one the agent speaks, each model one of those providers serves, and each
vars row fills every {{variable}} the runbook uses. Then each cell goes
through the same preflight a single run gets (the `preflight` callable: keys,
secrets, the agent's own refusals), so what passes here starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pier.agents import get_agent, known_agents
from pier.agents.cliagent import CliAgent
from pier.agents.providers import PROVIDERS, serves
from pier.errors import InputError
from pier.experiments.spec import Cell, ExperimentError, ExperimentSpec, cells
from pier.runbook.render import BUILTIN_VARS, placeholders
from pier.tasks.model import Task

Preflight = Callable[[dict[str, Any]], None]


def check(spec: ExperimentSpec, task: Task, preflight: Preflight, max_runs: int) -> list[Cell]:
    """The cells, once every one can start; ExperimentError naming the field otherwise."""
    found = cells(spec, workflow=task.is_workflow)
    runs = len(found) * spec.attempts
    if runs > max_runs:
        raise ExperimentError(
            "matrix", f"is {runs} runs, more than this server's limit of {max_runs} "
            "(PIER_EXPERIMENT_MAX_RUNS): fewer cells or attempts", runs,
        )  # fmt: skip
    try:
        if task.is_workflow and spec.matrix.agents:
            raise ExperimentError(
                "matrix.agents",
                "a workflow task runs no agent: its model steps name their models; give each vars row "
                "a model and read it by path (model_path: init_params.model)",
            )
        _check_agents(spec)
        if not task.is_workflow:
            _check_rows(spec, task)
    except ExperimentError as exc:
        raise ExperimentError(exc.field, exc.message, runs) from None
    for cell in found:
        try:
            preflight(cell.init_params)
        except InputError as exc:
            raise ExperimentError(f"cell {cell.key}", str(exc), runs) from None
    return found


def _check_agents(spec: ExperimentSpec) -> None:
    for i, axis in enumerate(spec.matrix.agents):
        where = f"matrix.agents[{i}]"
        if axis.name not in known_agents():
            raise ExperimentError(
                f"{where}.name",
                f"{axis.name!r} is not an agent pier runs; choose one of {', '.join(known_agents())}",
            )
        agent = get_agent(axis.name)
        supported = agent.providers if isinstance(agent, CliAgent) else ()
        for j, provider in enumerate(axis.providers):
            if provider not in PROVIDERS or provider not in supported:
                speaks = ", ".join(supported) or "no model provider"
                raise ExperimentError(
                    f"{where}.providers[{j}]",
                    f"agent {axis.name} cannot use {provider!r}: it speaks {speaks}",
                )
        for j, model in enumerate(axis.models):
            candidates = axis.providers or list(supported)
            if supported and not any(serves(p, model) for p in candidates):
                raise ExperimentError(
                    f"{where}.models[{j}]",
                    f"no provider agent {axis.name} may use ({', '.join(candidates)}) serves model {model!r}: "
                    "pick a model of theirs, or add a provider that serves it (openrouter serves most)",
                )


def _check_rows(spec: ExperimentSpec, task: Task) -> None:
    """Every variable the runbook uses is filled by each row (or by the task or experiment defaults)."""
    if not spec.matrix.vars:
        return
    instruction = spec.init_params.get("instruction") or task.init_params.get("instruction") or ""
    needed = [
        name for name in placeholders(str(instruction))
        if name not in BUILTIN_VARS and not name.startswith("secrets.")
    ]  # fmt: skip
    defaults = {**(task.init_params.get("vars") or {}), **(spec.init_params.get("vars") or {})}
    source = spec.matrix.dataset or "matrix.vars"
    for i, row in enumerate(spec.matrix.vars):
        missing = [name for name in needed if name not in row and name not in defaults]
        if missing:
            raise ExperimentError(
                f"matrix.vars[{i}]",
                f"row {i} of {source} has no value for {', '.join(missing)}, which the runbook uses: add it to the row",
            )
