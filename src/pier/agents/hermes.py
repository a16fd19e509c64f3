"""hermes (Nous Research's hermes-agent, from PyPI): `hermes -z` one-shot mode,
which prints only the final answer; its usage report and session export are
kept in /logs/agent."""

from __future__ import annotations

from typing import Any

import yaml

from pier.agents.base import AGENT_LOG_DIR, PIER_RUN_DIR, AgentPlan
from pier.agents.cliagent import PROMPT, CliAgent, CliRun, event
from pier.agents.install import InstallSpec
from pier.agents.mcp import McpServer, hermes_config
from pier.agents.pins import PINS
from pier.agents.providers import ProviderChoice

HERMES_HOME = f"{PIER_RUN_DIR}/hermes"  # config, sessions, its credential pool
USAGE_PATH = f"{AGENT_LOG_DIR}/hermes-usage.json"


class HermesAgent(CliAgent):
    name = "hermes"
    install_spec = InstallSpec("hermes", PINS["hermes"], "hermes", pip_extras=("mcp",))
    providers = ("openrouter", "anthropic", "openai")
    own_provider = "openrouter"
    stream_name = "log"  # plain text: one-shot mode prints the answer only

    def configure(self, plan: AgentPlan, choice: ProviderChoice, servers: list[McpServer]) -> CliRun:
        provider, env = _provider(choice)
        argv: list[Any] = ["hermes", "-z", PROMPT, "--provider", provider, "--usage-file", USAGE_PATH]
        if choice.model:
            argv += ["--model", choice.model]
        config = {"mcp_servers": hermes_config(servers)} if servers else {}
        export = f"{AGENT_LOG_DIR}/hermes-sessions.jsonl"
        return CliRun(
            argv=argv,
            env={"HERMES_HOME": HERMES_HOME, **env},
            config_files={f"{HERMES_HOME}/config.yaml": yaml.safe_dump(config).encode()},
            # The usage report as one JSON line, so usage() finds it in the output.
            after=f"[ -f {USAGE_PATH} ] && tr -d '\\n' < {USAGE_PATH} && echo",
            collect=(
                f"export HERMES_HOME={HERMES_HOME}; timeout 60 hermes sessions export {export} --format jsonl "
                f"--yes >/dev/null 2>&1; cp -r {HERMES_HOME}/logs {AGENT_LOG_DIR}/hermes-logs 2>/dev/null"
            ),
        )

    def readable(self, line: str) -> str | None:
        data = event(line)
        return line if data is None or "api_calls" not in data else None

    def usage(self, output: str) -> dict[str, Any]:
        for line in reversed(output.splitlines()):
            data = event(line)
            if data and "api_calls" in data:
                prompt, completion = int(data.get("input_tokens") or 0), int(data.get("output_tokens") or 0)
                return {"prompt_tokens": prompt, "completion_tokens": completion,
                        "total_tokens": int(data.get("total_tokens") or prompt + completion),
                        "cost_usd": data.get("estimated_cost_usd"), "api_calls": data.get("api_calls")}  # fmt: skip
        return {}


def _provider(choice: ProviderChoice) -> tuple[str, dict[str, str]]:
    if choice.name == "openrouter":
        return "openrouter", {"OPENROUTER_API_KEY": choice.key, "OPENROUTER_BASE_URL": choice.base_url}
    if choice.name == "anthropic":
        return "anthropic", {"ANTHROPIC_API_KEY": choice.key, "ANTHROPIC_BASE_URL": choice.base_url}
    # OpenAI through hermes's custom (OpenAI-compatible) endpoint provider.
    return "custom", {"CUSTOM_BASE_URL": choice.base_url, "OPENAI_API_KEY": choice.key}
