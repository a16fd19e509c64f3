"""gemini-cli: `gemini -p` headless with stream-json output, API-key auth chosen
in a system settings file (it refuses to start without a selected auth type)."""

from __future__ import annotations

from typing import Any

from pier.agents.base import AGENT_LOG_DIR, PIER_RUN_DIR, AgentPlan
from pier.agents.cliagent import PROMPT, CliAgent, CliRun, call_line, event, json_file, short
from pier.agents.install import InstallSpec
from pier.agents.mcp import McpServer, gemini_config
from pier.agents.pins import PINS
from pier.agents.providers import ProviderChoice

SETTINGS_PATH = f"{PIER_RUN_DIR}/gemini/settings.json"
SESSIONS = "/root/.gemini/tmp"
NOISE = ("Warning: 256-color support", "[STARTUP]", "YOLO mode is enabled", "Ripgrep is not available")


class GeminiCliAgent(CliAgent):
    name = "gemini-cli"
    install_spec = InstallSpec("gemini-cli", PINS["gemini-cli"], "gemini")
    providers = ("google",)  # it speaks only the Gemini API
    own_provider = "google"

    def configure(self, plan: AgentPlan, choice: ProviderChoice, servers: list[McpServer]) -> CliRun:
        argv: list[Any] = ["gemini", "-p", PROMPT, "--output-format", "stream-json", "--yolo", "--skip-trust"]
        if getattr(plan, "continue_from", None):  # in a kept sandbox: its latest session goes on
            argv += ["--resume", "latest"]
        if choice.model:
            argv += ["--model", choice.model]
        settings: dict[str, Any] = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"disableAutoUpdate": True},
        }
        if servers:
            settings["mcpServers"] = gemini_config(servers)
        env = {"GEMINI_API_KEY": choice.key, "GOOGLE_GEMINI_BASE_URL": choice.base_url,
               "GEMINI_CLI_SYSTEM_SETTINGS_PATH": SETTINGS_PATH}  # fmt: skip
        return CliRun(
            argv=argv,
            env=env,
            config_files={SETTINGS_PATH: json_file(settings)},
            collect=f"cp -r {SESSIONS} {AGENT_LOG_DIR}/gemini-sessions 2>/dev/null",
        )

    def readable(self, line: str) -> str | None:
        data = event(line)
        if data is None:
            return None if line.startswith(NOISE) else line
        kind = data.get("type")
        if kind == "init":
            return f"session {data.get('session_id')} started, model {data.get('model')}"
        if kind == "tool_use":
            return call_line(data.get("tool_name", "?"), data.get("parameters"))
        if kind == "tool_result":
            return short(f"tool result: {data.get('status')} {data.get('output') or ''}", 300)
        if kind == "message" and data.get("role") == "assistant":
            return short(data.get("content", ""))
        if kind == "result":
            return f"result: {data.get('status')}"
        if kind == "error":
            return short(f"error: {data.get('message')}")
        return None

    def usage(self, output: str) -> dict[str, Any]:
        stats = None
        for line in output.splitlines():
            data = event(line)
            if data and data.get("type") == "result":
                stats = data.get("stats") or {}
        if stats is None:
            return {}
        prompt, completion = int(stats.get("input_tokens") or 0), int(stats.get("output_tokens") or 0)
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": int(stats.get("total_tokens") or prompt + completion),
                "duration_seconds": (stats.get("duration_ms") or 0) / 1000}  # fmt: skip
