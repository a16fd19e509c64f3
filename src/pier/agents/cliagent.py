"""What the agent CLIs share: install from the pins, provider choice before the
sandbox exists, and one wrapper command that keeps the CLI's structured stream
whole in /logs/agent while each line also reaches the run log."""

from __future__ import annotations

import json
import shlex
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pier.agents.base import AGENT_LOG_DIR, PIER_RUN_DIR, Agent, AgentLaunch, AgentPlan, ProviderRoute
from pier.agents.install import InstallSpec, install_script, run_install
from pier.agents.mcp import McpServer, mcp_servers
from pier.agents.providers import ProviderChoice, choose_provider, env_names
from pier.sandbox.base import LayerRecipe, LineSink, Sandbox
from pier.sandbox.processes import stop_leftovers_after, through_term

PROMPT_PATH = f"{PIER_RUN_DIR}/prompt.md"
PROMPT = object()  # stands for the instruction in an argv
STDERR_TAIL = 30
READABLE_MAX = 400


@dataclass(frozen=True)
class CliRun:
    """One CLI invocation: argv (PROMPT marks the instruction), env, config files
    (written 0600 and deleted after the run), and how to save its session files."""

    argv: list[Any]
    env: Mapping[str, str] = field(default_factory=dict)
    config_files: Mapping[str, bytes] = field(default_factory=dict)
    collect: str = ""
    after: str = ""  # shell run right after the CLI; its output joins the CLI's
    before: str = ""  # shell run in /app just before the CLI (its config files are in place)


class CliAgent(Agent):
    install_spec: ClassVar[InstallSpec]
    providers: ClassVar[tuple[str, ...]]
    own_provider: ClassVar[str]
    stream_name: ClassVar[str] = "jsonl"  # extension of the stream file in /logs/agent
    # Providers whose endpoint this CLI cannot be pointed at: their key enters the sandbox.
    unrouted: ClassVar[tuple[str, ...]] = ()

    def install(self, sandbox: Sandbox, log: LineSink, timeout: float) -> None:
        run_install(sandbox, self.install_spec, log, timeout)

    def layer(self) -> LayerRecipe:
        spec = self.install_spec
        title = f"{self.name} {spec.pin.version} ({spec.pin.spec} from {spec.pin.registry})"
        return LayerRecipe(name=self.name, version=spec.pin.version, script=install_script(spec), title=title)

    def own(self, plan: AgentPlan) -> str:
        return self.own_provider

    def provider(self, plan: AgentPlan) -> ProviderChoice:
        return choose_provider(
            self.name, self.providers, self.own(plan), plan.model_provider, plan.model, plan.env,
            plan.upstreams, plan.operator_keys,
        )  # fmt: skip

    def preflight(self, plan: AgentPlan) -> None:
        self.provider(plan)
        mcp_servers(plan.mcp_servers)

    def env_names(self) -> tuple[str, ...]:
        return env_names(self.providers)

    @abstractmethod
    def configure(self, plan: AgentPlan, choice: ProviderChoice, servers: list[McpServer]) -> CliRun:
        """The CLI's command line, env and config files for this provider."""

    def launch(self, plan: AgentPlan, route: ProviderRoute | None = None) -> AgentLaunch:
        choice = self.provider(plan)
        routed = route is not None and choice.name not in self.unrouted
        if routed:
            assert route is not None
            choice = route(choice)
        run = self.configure(plan, choice, mcp_servers(plan.mcp_servers))
        pin = self.install_spec.pin
        via = "pier's model gateway" if routed else choice.provider.key_env
        return AgentLaunch(
            command=self._wrapped(run.argv, run.after, run.before),
            env=run.env,
            files={PROMPT_PATH: plan.instruction.encode()},
            credential_files=run.config_files,
            collect_command=run.collect,
            summary=f"{self.name} {pin.version}, provider {choice.name} ({via}), "
            f"model {choice.model or 'the CLI default'}",
        )

    @property
    def stream_path(self) -> str:
        return f"{AGENT_LOG_DIR}/{self.name}.{self.stream_name}"

    def _wrapped(self, argv: list[Any], after: str, before: str = "") -> str:
        words = [f'"$(cat {PROMPT_PATH})"' if a is PROMPT else shlex.quote(str(a)) for a in argv]
        stderr = f"{AGENT_LOG_DIR}/{self.name}.stderr.log"
        # stdout (the structured stream) is kept whole; stderr goes beside it and its
        # end is shown when the CLI fails, so the run log says why.
        return (
            "set -o pipefail\ncd /app\n"
            + (f"{before}\n" if before else "")
            # The agent ends when the CLI does: what it left running is stopped then.
            + f"{stop_leftovers_after(' '.join(words) + ' </dev/null 2>>' + stderr)} | "
            f"{through_term(f'tee {self.stream_path}')}\n"
            "status=$?\n"
            + (f"{after}\n" if after else "")
            + f'if [ "$status" -ne 0 ]; then echo "pier: {self.name} exited with code $status; '
            f'the end of its stderr:"; tail -n {STDERR_TAIL} {stderr}; fi\n'
            'exit "$status"\n'
        )


def json_file(data: Any) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()


def event(line: str) -> dict | None:
    """A JSON object line of a CLI's stream, or None for anything else."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def short(text: Any, limit: int = READABLE_MAX) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def call_line(tool: str, arguments: Any) -> str:
    if isinstance(arguments, dict):
        shown = ", ".join(f"{k}={short(v, 80)}" for k, v in arguments.items())
    else:
        shown = short(arguments, 200)
    return short(f"tool {tool}({shown})")
