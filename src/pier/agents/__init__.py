"""Agent adapters by name."""

from __future__ import annotations

from pier.agents.base import Agent, AgentLaunch
from pier.agents.script import ScriptAgent
from pier.errors import InputError

_AGENTS: dict[str, type[Agent]] = {"script": ScriptAgent}


def register(agent: type[Agent]) -> type[Agent]:
    _AGENTS[agent.name] = agent
    return agent


def get_agent(name: str | None) -> Agent:
    if not name:
        raise InputError(
            "the runbook names no agent and none can be inferred from its model: "
            f"set `agent:` to one of {', '.join(sorted(_AGENTS))}"
        )
    try:
        return _AGENTS[name]()
    except KeyError:
        raise InputError(
            f"agent '{name}' is not available; choose one of {', '.join(sorted(_AGENTS))}"
        ) from None


def known_agents() -> list[str]:
    return sorted(_AGENTS)


__all__ = ["Agent", "AgentLaunch", "get_agent", "known_agents", "register"]
