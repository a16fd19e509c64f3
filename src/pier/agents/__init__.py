"""Agent adapters by name."""

from __future__ import annotations

from pier.agents.base import Agent, AgentLaunch
from pier.agents.claude_code import ClaudeCodeAgent
from pier.agents.codex import CodexAgent
from pier.agents.gemini_cli import GeminiCliAgent
from pier.agents.hermes import HermesAgent
from pier.agents.opencode import OpencodeAgent
from pier.agents.pins import PINS
from pier.agents.script import ScriptAgent
from pier.errors import InputError

_AGENTS: dict[str, type[Agent]] = {
    agent.name: agent
    for agent in (ClaudeCodeAgent, CodexAgent, OpencodeAgent, GeminiCliAgent, HermesAgent, ScriptAgent)
}
# The built-in agents, in one place: docs, specs and tests read them from here.
AGENT_NAMES: tuple[str, ...] = tuple(_AGENTS)
# Those that run a CLI pier installs at its pin (all but script).
CLI_AGENTS: tuple[str, ...] = tuple(name for name in AGENT_NAMES if name in PINS)


def register(agent: type[Agent]) -> type[Agent]:
    _AGENTS[agent.name] = agent
    return agent


def get_agent(name: str | None) -> Agent:
    if not name:
        raise InputError(
            "the runbook names no agent and none can be inferred from its model: "
            f"set `agent:` to one of {', '.join(sorted(_AGENTS))} (or give one: pier run --agent NAME, init_params.agent)"
        )
    try:
        return _AGENTS[name]()
    except KeyError:
        raise InputError(
            f"agent '{name}' is not available; choose one of {', '.join(sorted(_AGENTS))}"
        ) from None


def known_agents() -> list[str]:
    return sorted(_AGENTS)


def agent_env_names(name: str | None) -> tuple[str, ...]:
    """The host variables an agent may need; none for an unknown agent."""
    agent = _AGENTS.get(name or "")
    return agent().env_names() if agent else ()


__all__ = [
    "AGENT_NAMES",
    "CLI_AGENTS",
    "Agent",
    "AgentLaunch",
    "agent_env_names",
    "get_agent",
    "known_agents",
    "register",
]
