"""claude-code: `claude -p` headless print mode with the stream-json output."""

from __future__ import annotations

from typing import Any

from pier.agents.base import AGENT_LOG_DIR, PIER_RUN_DIR, AgentPlan
from pier.agents.cliagent import PROMPT, CliAgent, CliRun, call_line, event, json_file, short
from pier.agents.install import InstallSpec
from pier.agents.mcp import McpServer, claude_config
from pier.agents.pins import PINS
from pier.agents.providers import ProviderChoice, without_v1

MCP_PATH = f"{PIER_RUN_DIR}/claude/mcp.json"
SESSIONS = "/root/.claude/projects"


class ClaudeCodeAgent(CliAgent):
    name = "claude-code"
    # Its native binary comes from an install script, which current npm blocks
    # unless the package is allowed to run it.
    install_spec = InstallSpec(
        "claude-code", PINS["claude-code"], "claude", npm_flags=("--allow-scripts=@anthropic-ai/claude-code",)
    )
    providers = ("anthropic", "openrouter", "bedrock")
    own_provider = "anthropic"

    def configure(self, plan: AgentPlan, choice: ProviderChoice, servers: list[McpServer]) -> CliRun:
        argv: list[Any] = ["claude", "-p", PROMPT, "--output-format", "stream-json", "--verbose",
                           "--dangerously-skip-permissions"]  # fmt: skip
        if choice.model:
            argv += ["--model", choice.model]
        if getattr(plan, "continue_from", None):  # in a kept sandbox: its last conversation goes on
            argv += ["--continue"]
        files = {}
        if servers:
            argv += ["--mcp-config", MCP_PATH]
            files[MCP_PATH] = json_file(claude_config(servers))
        return CliRun(
            argv=argv,
            env={**_provider_env(choice), **_quiet_env(), **_retries_env(getattr(plan, "timeout_sec", None))},
            config_files=files,
            collect=f"mkdir -p {AGENT_LOG_DIR}/claude && cp -r {SESSIONS} {AGENT_LOG_DIR}/claude/ 2>/dev/null",
        )

    def readable(self, line: str) -> str | None:
        data = event(line)
        if data is None:
            return line
        kind = data.get("type")
        if kind == "system" and data.get("subtype") == "init":
            return f"session {data.get('session_id')} started, model {data.get('model')}"
        if kind in ("assistant", "user"):
            lines = [_block_line(b) for b in (data.get("message") or {}).get("content") or []]
            shown = [line for line in lines if line]
            return "\n".join(shown) if shown else None
        if kind == "result":
            return short(f"result: {data.get('subtype', '')} after {data.get('num_turns')} turn(s), "
                         f"cost ${data.get('total_cost_usd') or 0:.4f}: {data.get('result') or ''}")  # fmt: skip
        return None

    def usage(self, output: str) -> dict[str, Any]:
        result, calls = None, set()
        for line in output.splitlines():
            data = event(line)
            if data and data.get("type") == "result":
                result = data
            elif data and data.get("type") == "assistant":
                calls.add((data.get("message") or {}).get("id"))
        if result is None:
            return {}
        tokens = result.get("usage") or {}
        prompt = sum(int(tokens.get(k) or 0) for k in
                     ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))  # fmt: skip
        completion = int(tokens.get("output_tokens") or 0)
        return {
            "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "cost_usd": result.get("total_cost_usd"), "duration_seconds": (result.get("duration_ms") or 0) / 1000,
            "api_calls": len(calls - {None}),
        }  # fmt: skip


def _provider_env(choice: ProviderChoice) -> dict[str, str]:
    if choice.name == "openrouter":
        # OpenRouter speaks the Messages API at its /api root; the key is a bearer token.
        return {"ANTHROPIC_BASE_URL": without_v1(choice.base_url), "ANTHROPIC_AUTH_TOKEN": choice.key,
                "ANTHROPIC_API_KEY": ""}  # fmt: skip
    if choice.name == "bedrock":
        env = {"CLAUDE_CODE_USE_BEDROCK": "1", "AWS_BEARER_TOKEN_BEDROCK": choice.key, **choice.env}
        if choice.base_url:
            env["ANTHROPIC_BEDROCK_BASE_URL"] = choice.base_url
        return env
    return {"ANTHROPIC_API_KEY": choice.key, "ANTHROPIC_BASE_URL": choice.base_url}


def _quiet_env() -> dict[str, str]:
    # IS_SANDBOX: it refuses --dangerously-skip-permissions as root otherwise.
    return {"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}


# claude-code waits 0.5 s, 1 s, 2 s ... (at most 32 s) between tries of a failed
# request, 10 tries by default: a provider that refuses every request (a wrong
# key answers 401 again and again) kept it waiting past a short time limit,
# ending as a timeout. Its tries are bounded so that their waits take at most a
# quarter of the run's time limit: it gives up, saying why, while pier still
# reads what the provider answered.
RETRY_SHARE = 0.25
MIN_RETRIES, MAX_RETRIES = 2, 10


def max_retries(timeout_sec: float | None) -> int:
    if not timeout_sec:
        return MAX_RETRIES
    budget, waited, tries = timeout_sec * RETRY_SHARE, 0.0, 0
    while tries < MAX_RETRIES and waited + min(0.5 * 2**tries, 32) <= budget:
        waited += min(0.5 * 2**tries, 32)
        tries += 1
    return max(tries, MIN_RETRIES)


def _retries_env(timeout_sec: float | None) -> dict[str, str]:
    return {"CLAUDE_CODE_MAX_RETRIES": str(max_retries(timeout_sec))}


def _block_line(block: dict) -> str | None:
    kind = block.get("type")
    if kind == "text" and block.get("text"):
        return short(block["text"])
    if kind == "tool_use":
        return call_line(block.get("name", "?"), block.get("input"))
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        return short(f"tool result: {content}", 300)
    return None
