"""codex: `codex exec --json`, against a model provider defined in its own
config.toml (this codex ignores OPENAI_BASE_URL for its built-in provider)."""

from __future__ import annotations

from typing import Any

from pier.agents.base import AGENT_LOG_DIR, PIER_RUN_DIR, AgentPlan
from pier.agents.cliagent import PROMPT, CliAgent, CliRun, event, short
from pier.agents.install import InstallSpec
from pier.agents.mcp import McpServer, codex_toml, toml_str
from pier.agents.pins import PINS
from pier.agents.providers import ProviderChoice

CODEX_HOME = f"{PIER_RUN_DIR}/codex"  # config, sessions; deleted after the run
# Where codex's own state (its sessions, their index; never config.toml or a login)
# stays in the sandbox between runs, outside /run/pier, so a run that continues in a
# kept sandbox resumes the conversation (`codex exec resume --last`): docs/sessions.md.
CODEX_STATE = "/root/.local/state/pier/codex"
_SAVE_STATE = (
    f"rm -rf {CODEX_STATE} && mkdir -p {CODEX_STATE} && cp -a {CODEX_HOME}/. {CODEX_STATE}/ 2>/dev/null; "
    f"rm -f {CODEX_STATE}/config.toml {CODEX_STATE}/auth.json"
)
_RESTORE_STATE = f"if [ -d {CODEX_STATE} ]; then cp -a {CODEX_STATE}/. {CODEX_HOME}/; fi"


class CodexAgent(CliAgent):
    name = "codex"
    install_spec = InstallSpec("codex", PINS["codex"], "codex")
    providers = ("openai", "openrouter")
    own_provider = "openai"

    def configure(self, plan: AgentPlan, choice: ProviderChoice, servers: list[McpServer]) -> CliRun:
        argv: list[Any] = ["codex", "exec", "--json", "--skip-git-repo-check", "-C", "/app",
                           "--dangerously-bypass-approvals-and-sandbox"]  # fmt: skip
        if choice.model:
            argv += ["--model", choice.model]
        resume = bool(getattr(plan, "continue_from", None))  # in a kept sandbox: its last session goes on
        if resume:
            argv += ["resume", "--last"]
        argv.append(PROMPT)
        # Both providers get the key as OPENAI_API_KEY and their endpoint as the base URL.
        env = {"CODEX_HOME": CODEX_HOME, "OPENAI_API_KEY": choice.key, "OPENAI_BASE_URL": choice.base_url}
        return CliRun(
            argv=argv,
            env=env,
            config_files={f"{CODEX_HOME}/config.toml": config_toml(choice, servers).encode()},
            collect=f"cp -r {CODEX_HOME}/sessions {AGENT_LOG_DIR}/codex-sessions 2>/dev/null; {_SAVE_STATE}",
            before=_RESTORE_STATE if resume else "",
        )

    def readable(self, line: str) -> str | None:
        data = event(line)
        if data is None:
            return None if line.startswith("WARNING: failed to clean up stale arg0") else line
        kind, item = data.get("type"), data.get("item") or {}
        if kind in ("item.started", "item.completed"):
            return _item_line(kind, item)
        if kind == "turn.completed":
            usage = data.get("usage") or {}
            return f"turn done: {usage.get('input_tokens', 0)} tokens in, {usage.get('output_tokens', 0)} out"
        if kind in ("error", "turn.failed"):
            return short(f"error: {data.get('message') or (data.get('error') or {}).get('message')}")
        return None

    def usage(self, output: str) -> dict[str, Any]:
        prompt = completion = turns = 0
        for line in output.splitlines():
            data = event(line)
            if data and data.get("type") == "turn.completed":
                usage = data.get("usage") or {}
                prompt += int(usage.get("input_tokens") or 0)
                completion += int(usage.get("output_tokens") or 0)
                turns += 1
        if not turns:
            return {}
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def config_toml(choice: ProviderChoice, servers: list[McpServer]) -> str:
    lines = [f"model = {toml_str(choice.model)}"] if choice.model else []
    lines += [
        'model_provider = "pier"',
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        "",
        "[model_providers.pier]",
        f"name = {toml_str(choice.name)}",
        f"base_url = {toml_str(choice.base_url)}",
        'env_key = "OPENAI_API_KEY"',
        'wire_api = "responses"',
    ]
    mcp = codex_toml(servers)
    return "\n".join(lines) + ("\n\n" + mcp if mcp else "") + "\n"


def _item_line(kind: str, item: dict) -> str | None:
    what = item.get("type")
    if what == "command_execution":
        if kind == "item.started":
            return short(f"$ {item.get('command')}")
        return short(f"exit {item.get('exit_code')}: {item.get('aggregated_output') or ''}", 300)
    if kind != "item.completed":
        return None
    if what == "agent_message":
        return short(item.get("text", ""))
    if what == "file_change":
        return short(f"file change: {item.get('changes')}")
    if what == "mcp_tool_call":
        return short(f"tool {item.get('server')}.{item.get('tool')}: {item.get('status')}")
    if what == "error":
        return short(f"warning: {item.get('message')}")
    return None
