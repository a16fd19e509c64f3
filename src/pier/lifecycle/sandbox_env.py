"""Which variables a run's sandbox gets (SPEC 5: a collection's environment
reaches the sandbox as environment variables; a runbook's `secrets` says which
are required).

A collection holds the secrets of all its tasks; a run gets only the ones its
runbook declares and the ones its agent reads (model API keys), so a runbook
cannot read what it did not ask for. `secret_params` are sent for one run
alone, so the caller has already chosen them: they all pass, and win over the
collection's values of the same name.
"""

from __future__ import annotations

from collections.abc import Mapping

from pier.agents import agent_env_names
from pier.errors import InputError
from pier.tasks.build import infer_agent
from pier.tasks.resolve import ResolvedStep


def declared_names(step: ResolvedStep) -> dict[str, bool]:
    """Variable name -> required, from the runbook's `secrets` (an entry's `env`
    names the variable, else the entry's own name)."""
    names: dict[str, bool] = {}
    for name, decl in step.secrets.items():
        decl = decl or {}
        names[decl.get("env") or name] = bool(decl.get("required"))
    return names


def agent_names(step: ResolvedStep) -> tuple[str, ...]:
    """The variables the run's agent reads (its keys and provider endpoints)."""
    return agent_env_names(step.agent or infer_agent(step.model))


def sandbox_env(
    step: ResolvedStep,
    collection_env: Mapping[str, str],
    secret_params: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The run's environment. Raises InputError naming required variables that
    neither the collection nor secret_params provide."""
    declared = declared_names(step)
    wanted = set(declared) | set(agent_names(step))
    env = {name: value for name, value in collection_env.items() if name in wanted}
    env.update(secret_params or {})
    missing = sorted(name for name, required in declared.items() if required and name not in env)
    if missing:
        raise InputError(
            f"the runbook requires {', '.join(missing)}, which this run does not have: set "
            "it in the collection's environment (PATCH /api/v1/collections/{collection}/environment) "
            "or send it in secret_params"
        )
    return env
