"""The adapters' command lines, environments and config files per provider, and
how they read the real streams their CLIs printed (streams/, recorded from the
pinned CLIs against the scripted model server)."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from pier.agents import agent_env_names, get_agent
from pier.errors import InputError
from pier.lifecycle.plan import RunPlan

STREAMS = Path(__file__).parent / "streams"
PLAN = RunPlan(
    trajectory_id="t", collection="c", task="t", agent="claude-code", model=None, model_provider=None,
    instruction="Write the answer.", snapshot=None, image=None, base_image=None, apt_packages=(),
    pip_packages=(), cpus=1, memory="1G", timeout_sec=60, network=True, assets=(), checks=(),
    checks_isolation="same", primary_outputs=(), mcp_servers={}, secret_decls={}, env={}, vars={},
)  # fmt: skip


def plan(agent: str, **changes) -> RunPlan:
    return replace(PLAN, agent=agent, **changes)


def test_claude_code_anthropic_and_openrouter():
    agent = get_agent("claude-code")
    launch = agent.launch(plan("claude-code", model="claude-sonnet-4-5", env={"ANTHROPIC_API_KEY": "an-k"}))
    assert launch.env["ANTHROPIC_API_KEY"] == "an-k" and launch.env["IS_SANDBOX"] == "1"
    assert 'claude -p "$(cat /run/pier/prompt.md)" --output-format stream-json --verbose' in launch.command
    assert (
        "--model claude-sonnet-4-5" in launch.command
        and "exec tee /logs/agent/claude-code.jsonl" in launch.command
    )
    assert launch.files == {"/run/pier/prompt.md": b"Write the answer."}
    routed = agent.launch(plan("claude-code", model="claude-sonnet-4.5", env={"OPENROUTER_API_KEY": "or-k"}))
    assert routed.env["ANTHROPIC_BASE_URL"] == "https://openrouter.ai/api"
    assert routed.env["ANTHROPIC_AUTH_TOKEN"] == "or-k" and routed.env["ANTHROPIC_API_KEY"] == ""
    assert "--model anthropic/claude-sonnet-4.5" in routed.command
    assert "provider openrouter (OPENROUTER_API_KEY)" in routed.summary


def test_claude_code_bedrock_and_mcp():
    servers = {"fs": {"command": "npx", "args": ["@mcp/fs"]}}
    launch = get_agent("claude-code").launch(
        plan(
            "claude-code",
            model_provider="bedrock",
            env={"AWS_BEARER_TOKEN_BEDROCK": "br"},
            mcp_servers=servers,
        )
    )
    assert launch.env["CLAUDE_CODE_USE_BEDROCK"] == "1" and launch.env["AWS_REGION"] == "us-east-1"
    assert "--mcp-config /run/pier/claude/mcp.json" in launch.command
    assert (
        json.loads(launch.credential_files["/run/pier/claude/mcp.json"])["mcpServers"]["fs"]["command"]
        == "npx"
    )


def test_codex_gets_its_provider_in_config_toml():
    for provider, env, url in (
        ("openai", {"OPENAI_API_KEY": "oa"}, "https://api.openai.com/v1"),
        ("openrouter", {"OPENROUTER_API_KEY": "or"}, "https://openrouter.ai/api/v1"),
    ):
        launch = get_agent("codex").launch(plan("codex", model="gpt-5", model_provider=provider, env=env))
        config = tomllib.loads(launch.credential_files["/run/pier/codex/config.toml"].decode())
        assert config["model_providers"]["pier"]["base_url"] == url
        assert (
            launch.env["OPENAI_API_KEY"] == next(iter(env.values())) and launch.env["OPENAI_BASE_URL"] == url
        )
        assert config["model"] == ("openai/gpt-5" if provider == "openrouter" else "gpt-5")
        assert "codex exec --json" in launch.command and "</dev/null" in launch.command


def test_opencode_provider_follows_the_model():
    launch = get_agent("opencode").launch(
        plan("opencode", model="openai/gpt-5", env={"OPENAI_API_KEY": "oa", "ANTHROPIC_API_KEY": "an"})
    )
    config = json.loads(launch.credential_files["/run/pier/opencode/opencode.json"])
    assert (
        config["model"] == "openai/gpt-5"
        and config["provider"]["openai"]["options"]["apiKey"] == "{env:OPENAI_API_KEY}"
    )
    assert launch.env["OPENCODE_CONFIG"] == "/run/pier/opencode/opencode.json"
    routed = get_agent("opencode").launch(
        plan("opencode", model="anthropic/claude-sonnet-4.5", env={"OPENROUTER_API_KEY": "or"})
    )
    assert "--model openrouter/anthropic/claude-sonnet-4.5" in routed.command


def test_gemini_cli_is_google_only_and_selects_api_key_auth():
    launch = get_agent("gemini-cli").launch(
        plan("gemini-cli", model="gemini-2.5-pro", env={"GEMINI_API_KEY": "g"})
    )
    settings = json.loads(launch.credential_files["/run/pier/gemini/settings.json"])
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert launch.env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] == "/run/pier/gemini/settings.json"
    with pytest.raises(InputError, match="supports google"):
        get_agent("gemini-cli").launch(
            plan("gemini-cli", model_provider="openrouter", env={"OPENROUTER_API_KEY": "o"})
        )


def test_hermes_providers_and_mcp():
    servers = {"web": {"url": "https://mcp.example/mcp"}}
    launch = get_agent("hermes").launch(plan("hermes", model="anthropic/claude-sonnet-4.5",
                                             env={"OPENROUTER_API_KEY": "or"}, mcp_servers=servers))  # fmt: skip
    assert 'hermes -z "$(cat /run/pier/prompt.md)" --provider openrouter' in launch.command
    config = yaml.safe_load(launch.credential_files["/run/pier/hermes/config.yaml"])
    assert config["mcp_servers"]["web"]["url"] == "https://mcp.example/mcp"
    custom = get_agent("hermes").launch(plan("hermes", model_provider="openai", env={"OPENAI_API_KEY": "oa"}))
    assert (
        "--provider custom" in custom.command and custom.env["CUSTOM_BASE_URL"] == "https://api.openai.com/v1"
    )


def test_preflight_names_the_missing_key_for_every_cli_agent():
    for name, variable in (("claude-code", "ANTHROPIC_API_KEY"), ("codex", "OPENAI_API_KEY"),
                           ("opencode", "ANTHROPIC_API_KEY"), ("gemini-cli", "GEMINI_API_KEY"),
                           ("hermes", "OPENROUTER_API_KEY")):  # fmt: skip
        with pytest.raises(InputError, match=f"set {variable}"):
            get_agent(name).preflight(plan(name))


def test_env_names_for_pier_run():
    assert "ANTHROPIC_API_KEY" in agent_env_names("claude-code") and "OPENAI_API_KEY" not in agent_env_names(
        "claude-code"
    )
    assert agent_env_names("script") == () and agent_env_names(None) == ()


def readable_lines(agent: str) -> list[str]:
    lines = (STREAMS / f"{agent}.jsonl").read_text().splitlines()
    return [r for line in lines if (r := get_agent(agent).readable(line)) is not None]


@pytest.mark.parametrize(
    ("agent", "tool_line"),
    [
        ("claude-code", "tool Write(file_path=/app/results/answer.md"),
        ("codex", "$ /bin/bash -lc"),
        ("opencode", "tool write(filePath=/app/results/answer.md"),
        ("gemini-cli", "tool write_file(file_path=/app/results/answer.md"),
    ],
)
def test_streams_become_readable_lines(agent, tool_line):
    lines = readable_lines(agent)
    assert any(line.startswith(tool_line) for line in lines), lines
    assert any("Done: the answer is in /app/results/answer.md." in line for line in lines)
    assert all(len(line) <= 800 for line in lines)


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        # api_calls counts distinct message ids; this recording gave both turns one id
        ("claude-code", {"prompt_tokens": 200, "completion_tokens": 40, "total_tokens": 240, "api_calls": 1}),
        ("codex", {"prompt_tokens": 200, "completion_tokens": 40, "total_tokens": 240}),
        ("opencode", {"prompt_tokens": 200, "completion_tokens": 40, "total_tokens": 240, "api_calls": 2}),
        ("gemini-cli", {"prompt_tokens": 200, "completion_tokens": 40, "total_tokens": 240}),
    ],
)
def test_usage_from_the_streams(agent, expected):
    usage = get_agent(agent).usage((STREAMS / f"{agent}.jsonl").read_text())
    assert expected.items() <= usage.items(), usage


def test_claude_code_reports_its_cost_and_hermes_its_usage_file():
    assert get_agent("claude-code").usage((STREAMS / "claude-code.jsonl").read_text())[
        "cost_usd"
    ] == pytest.approx(0.0012)
    report = {
        "estimated_cost_usd": 0.5,
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "api_calls": 3,
    }
    usage = get_agent("hermes").usage("Done.\n" + json.dumps(report))
    assert usage == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "cost_usd": 0.5,
        "api_calls": 3,
    }
    assert get_agent("hermes").readable(json.dumps(report)) is None


def test_claude_codes_retries_are_bounded_by_the_runs_time_limit():
    """claude-code retried a refused request 10 times with waits up to 32 s: a
    wrong key made a 120 s run end as a timeout. Its tries' waits now take at
    most a quarter of the time limit (a short run gives up in seconds)."""
    agent = get_agent("claude-code")
    env = {"ANTHROPIC_API_KEY": "an-k"}
    short = agent.launch(plan("claude-code", model="claude-sonnet-4-5", env=env, timeout_sec=120))
    long = agent.launch(plan("claude-code", model="claude-sonnet-4-5", env=env, timeout_sec=1800))
    assert short.env["CLAUDE_CODE_MAX_RETRIES"] == "5"  # waits 0.5 + 1 + 2 + 4 + 8 s <= 30 s
    assert long.env["CLAUDE_CODE_MAX_RETRIES"] == "10"  # its own default


def test_claude_code_continues_its_conversation_only_in_a_continued_run():
    agent = get_agent("claude-code")
    env = {"ANTHROPIC_API_KEY": "an-k"}
    assert "--continue" not in agent.launch(plan("claude-code", env=env)).command
    follow = agent.launch(plan("claude-code", env=env, continue_from="a" * 32)).command
    assert 'claude -p "$(cat /run/pier/prompt.md)"' in follow and " --continue" in follow


def test_opencode_continues_its_session_only_in_a_continued_run():
    agent = get_agent("opencode")
    env = {"ANTHROPIC_API_KEY": "an-k"}
    model = "anthropic/claude-sonnet-4-5"
    assert "--continue" not in agent.launch(plan("opencode", model=model, env=env)).command
    assert (
        "--continue" in agent.launch(plan("opencode", model=model, env=env, continue_from="a" * 32)).command
    )


def test_gemini_cli_resumes_its_latest_session_only_in_a_continued_run():
    agent = get_agent("gemini-cli")
    env = {"GEMINI_API_KEY": "g-k"}
    assert "--resume" not in agent.launch(plan("gemini-cli", env=env)).command
    assert "--resume latest" in agent.launch(plan("gemini-cli", env=env, continue_from="a" * 32)).command


def test_codex_resumes_its_last_session_only_in_a_continued_run():
    from pier.agents.codex import CODEX_STATE

    agent = get_agent("codex")
    env = {"OPENAI_API_KEY": "o-k"}
    first = agent.launch(plan("codex", env=env))
    assert "resume" not in first.command and CODEX_STATE not in first.command
    assert CODEX_STATE in first.collect_command, "the session is not saved outside /run/pier"
    assert "rm -f /root/.local/state/pier/codex/config.toml" in first.collect_command
    follow = agent.launch(plan("codex", env=env, continue_from="a" * 32)).command
    assert 'resume --last "$(cat /run/pier/prompt.md)"' in follow
    assert follow.index(f"cp -a {CODEX_STATE}/.") < follow.index("codex exec"), "restored after it started"
