"""The agent adapter contract: what the set up, run agent and clean up stages ask of
an agent. One small adapter per agent."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pier.agents.providers import ProviderChoice
from pier.agents.upstreams import Upstreams
from pier.sandbox.base import LayerRecipe, LineSink, Sandbox

# The gateway's stand-in for a provider choice: same provider, its own key and endpoint.
ProviderRoute = Callable[[ProviderChoice], ProviderChoice]

AGENT_LOG_DIR = "/logs/agent"
AGENT_LOG = f"{AGENT_LOG_DIR}/agent.log"
PIER_RUN_DIR = "/run/pier"  # pier's own files in the sandbox; removed before checks


@dataclass(frozen=True)
class AgentLaunch:
    """How to start the agent: its command (run by bash in /app), its environment,
    and the files to write first. `credential_files` are deleted after the agent;
    `collect_command` runs just before that, whatever happened to the agent, to copy
    the CLI's own session files into /logs/agent."""

    command: str
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, bytes] = field(default_factory=dict)
    credential_files: Mapping[str, bytes] = field(default_factory=dict)
    collect_command: str = ""
    summary: str = ""  # one line for the run log: version, provider, model


class AgentPlan(Protocol):
    """What an agent reads of a run's plan. The lifecycle's RunPlan has these (and
    more); declaring them here keeps agents below the lifecycle that uses them."""

    @property
    def model(self) -> str | None: ...
    @property
    def model_provider(self) -> str | None: ...
    @property
    def instruction(self) -> str: ...
    @property
    def mcp_servers(self) -> Mapping[str, Any]: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def timeout_sec(self) -> int: ...
    @property
    def upstreams(self) -> Upstreams: ...
    @property
    def operator_keys(self) -> frozenset[str]: ...


class Agent(ABC):
    name: str
    needs_model: bool = True

    def install(self, sandbox: Sandbox, log: LineSink, timeout: float) -> None:
        """Make the agent runnable in the sandbox (install or pin its CLI).
        Raises StageError naming the agent, the version and the installer's last lines."""

    def layer(self) -> LayerRecipe | None:
        """What install puts in a sandbox, as a script a backend can run once per
        image into a cached layer (then install is skipped); None when there is
        nothing to install."""
        return None

    def preflight(self, plan: AgentPlan) -> None:
        """Check what can be checked before a sandbox exists (keys, provider, MCP
        config). Raises InputError naming what to set."""

    def env_names(self) -> tuple[str, ...]:
        """The host variables this agent may need (keys, endpoints): `pier run`
        passes these, and the runbook's secrets, never the whole environment."""
        return ()

    @abstractmethod
    def launch(self, plan: AgentPlan, route: ProviderRoute | None = None) -> AgentLaunch:
        """The command, env and files for a headless run of plan's instruction.
        `route` (pier's model gateway) replaces the provider's key and endpoint
        with the gateway's, so that the real key never enters the sandbox."""

    def readable(self, line: str) -> str | None:
        """The run-log form of one output line (None hides it). Default: as is."""
        return line

    def usage(self, output: str) -> dict[str, Any]:
        """Tokens and cost the CLI reported, when it does."""
        return {}
