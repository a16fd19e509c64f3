"""Which variables a run's sandbox gets (a collection's environment reaches the
sandbox as environment variables; a runbook's `secrets` says which are required).

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
from pier.lifecycle.plan import secret_variable
from pier.tasks.build import infer_agent
from pier.tasks.resolve import ResolvedStep


def declared_names(step: ResolvedStep) -> dict[str, bool]:
    """Variable name -> required, from the runbook's `secrets` (an entry's `env`
    names the variable, else the entry's own name)."""
    return {
        secret_variable(name, decl): bool((decl or {}).get("required")) for name, decl in step.secrets.items()
    }


def agent_names(step: ResolvedStep) -> tuple[str, ...]:
    """The variables the run's agent reads (its keys and provider endpoints)."""
    return agent_env_names(step.agent or infer_agent(step.model))


def wanted_names(step: ResolvedStep) -> set[str]:
    """Every variable the run may receive: its declared secrets and its agent's own."""
    return set(declared_names(step)) | set(agent_names(step))


def caller_env(step: ResolvedStep, environ: Mapping[str, str]) -> dict[str, str]:
    """What a local caller's environment gives a run (`pier run`, `pier
    experiment run`): only the variables its secrets and its agent name, never
    the whole environment."""
    return {name: environ[name] for name in wanted_names(step) if name in environ}


def sandbox_env(
    step: ResolvedStep,
    collection_env: Mapping[str, str],
    secret_params: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The run's environment. Raises InputError naming required variables that
    neither the collection nor secret_params provide."""
    declared = declared_names(step)
    wanted = wanted_names(step)
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
