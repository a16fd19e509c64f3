"""opencode: `opencode run --format json` with an opencode.json that points its
provider at the chosen endpoint and key variable."""

from __future__ import annotations

from typing import Any

from pier.agents.base import AGENT_LOG_DIR, PIER_RUN_DIR, AgentPlan
from pier.agents.cliagent import PROMPT, CliAgent, CliRun, call_line, event, json_file, short
from pier.agents.install import InstallSpec
from pier.agents.mcp import McpServer, opencode_config
from pier.agents.pins import PINS
from pier.agents.providers import ProviderChoice, without_v1

CONFIG_PATH = f"{PIER_RUN_DIR}/opencode/opencode.json"
DATA_DIR = "/root/.local/share/opencode"
PROVIDER_IDS = {"anthropic": "anthropic", "openai": "openai", "openrouter": "openrouter",
                "google": "google", "bedrock": "amazon-bedrock"}  # fmt: skip
MODEL_PREFIXES = {"anthropic/": "anthropic", "openai/": "openai", "google/": "google", "openrouter/": "openrouter",
                  "claude-": "anthropic", "gpt-": "openai", "o3": "openai", "o4": "openai", "gemini-": "google"}  # fmt: skip


class OpencodeAgent(CliAgent):
    name = "opencode"
    install_spec = InstallSpec(
        "opencode", PINS["opencode"], "opencode", npm_flags=("--allow-scripts=opencode-ai",)
    )
    providers = ("anthropic", "openrouter", "openai", "google", "bedrock")
    own_provider = "anthropic"
    # Its Bedrock provider signs for AWS's own endpoint and takes no base URL.
    unrouted = ("bedrock",)

    def own(self, plan: AgentPlan) -> str:
        """opencode has no provider of its own: the model's vendor is the natural one."""
        model = (plan.model or "").lower()
        return next(
            (p for prefix, p in MODEL_PREFIXES.items() if model.startswith(prefix)), self.own_provider
        )

    def configure(self, plan: AgentPlan, choice: ProviderChoice, servers: list[McpServer]) -> CliRun:
        provider_id = PROVIDER_IDS[choice.name]
        model = (choice.model or "").removeprefix("openrouter/")
        argv: list[Any] = ["opencode", "run", "--format", "json", "--auto"]
        if getattr(plan, "continue_from", None):  # in a kept sandbox: its last session goes on
            argv += ["--continue"]
        if model:
            argv += ["--model", f"{provider_id}/{model}"]
        argv.append(PROMPT)
        config = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
            "provider": {provider_id: _provider_config(choice, model)},
            **({"model": f"{provider_id}/{model}"} if model else {}),
            **({"mcp": opencode_config(servers)} if servers else {}),
        }
        return CliRun(
            argv=argv,
            env={"OPENCODE_CONFIG": CONFIG_PATH, choice.provider.key_env: choice.key, **choice.env},
            config_files={CONFIG_PATH: json_file(config)},
            collect=f"cp -r {DATA_DIR}/log {AGENT_LOG_DIR}/opencode-log 2>/dev/null",
        )

    def readable(self, line: str) -> str | None:
        data = event(line)
        if data is None:
            return line
        part = data.get("part") or {}
        kind = data.get("type")
        if kind == "tool_use":
            state = part.get("state") or {}
            return "\n".join([call_line(part.get("tool", "?"), state.get("input")),
                              short(f"tool result: {state.get('output') or state.get('error') or ''}", 300)])  # fmt: skip
        if kind == "text":
            return short(part.get("text", ""))
        if kind == "error":
            return short(f"error: {data.get('error')}")
        return None

    def usage(self, output: str) -> dict[str, Any]:
        prompt = completion = steps = 0
        cost = 0.0
        for line in output.splitlines():
            data = event(line)
            if not data or data.get("type") != "step_finish":
                continue
            part = data.get("part") or {}
            tokens = part.get("tokens") or {}
            cache = tokens.get("cache") or {}
            prompt += (
                int(tokens.get("input") or 0) + int(cache.get("read") or 0) + int(cache.get("write") or 0)
            )
            completion += int(tokens.get("output") or 0) + int(tokens.get("reasoning") or 0)
            cost += float(part.get("cost") or 0)
            steps += 1
        if not steps:
            return {}
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "cost_usd": round(cost, 6), "api_calls": steps}  # fmt: skip


def _provider_config(choice: ProviderChoice, model: str) -> dict:
    options: dict[str, Any] = {"apiKey": "{env:" + choice.provider.key_env + "}"}
    if choice.name == "anthropic":
        options["baseURL"] = without_v1(choice.base_url) + "/v1"
    elif choice.name == "google":
        options["baseURL"] = choice.base_url + "/v1beta"
    elif choice.name == "bedrock":
        options = {"region": choice.env.get("AWS_REGION")}
    else:
        options["baseURL"] = choice.base_url
    # Declaring the model lets a name its built-in catalogue lacks work too.
    return {"options": options, **({"models": {model: {}}} if model else {})}
