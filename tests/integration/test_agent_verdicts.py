"""What a run says when its provider refuses, rate-limits or fails the agent,
with the real codex, claude-code and opencode CLIs against the scripted
provider (tests/support/model_server.py): the error names the provider's answer
(the status, how many requests got it, the last message) before what the agent
then did, within the runbook's time limit; and what a run's usage is: the
gateway's measured figures (the provider's own cost when it reports one, every
request counted, opencode's title request included), which claude-code's ATIF
steps add up to."""

from __future__ import annotations

import re
import time
import uuid

import pytest
from tests.integration.test_agents import CASES, Case, runbook_text, start, stored_text
from tests.support.runs import run_folder

from pier.experiments.atif import run_trajectory
from pier.gateway.usage import is_generation
from pier.lifecycle.start import Services
from pier.settings import get_settings

pytestmark = pytest.mark.integration
TIMEOUT_SEC = 120  # the runbook's time limit

BY_ID = {case.id: case for case in CASES}
AGENTS = [BY_ID["claude-code-default"], BY_ID["codex-default"], BY_ID["opencode-default"]]
MODES = {
    "401": ("provider_refused", "401 Unauthorized", "invalid x-api-key"),
    "429": ("rate_limited", "429 Too Many Requests", "rate limit reached for requests"),
    "500": ("provider_error", "500 Internal Server Error", "internal server error"),
}


def limited(case: Case) -> str:
    return runbook_text(case).replace("---\n#", f"timeout_sec: {TIMEOUT_SEC}\n---\n#", 1)


def env_for(case: Case, model_server) -> dict[str, str]:
    return {
        case.key_env: f"sk-pier-test-{uuid.uuid4().hex}",
        case.base_env: model_server.url + case.base_suffix,
    }


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("case", AGENTS, ids=lambda c: c.agent)
def test_the_providers_answer_is_the_runs_verdict(case, mode, agent_image, model_server):
    """On main: codex 'exited with code 1: see the agent log', claude-code 'timed
    out after 60 s' with no 401 in its log, opencode's 500s a timeout."""
    model_server.mode = mode
    outcome, answer, message = MODES[mode]
    env = env_for(case, model_server)
    began = time.monotonic()

    record = start(limited(case), agent_image, env)

    took = time.monotonic() - began
    print(f"{case.agent} {mode}: {took:.0f} s, {len(model_server.requests)} request(s): {record.error}")
    calls = [c for c in model_server.model_calls() if is_generation(c.path)]
    assert calls, "the CLI never called the model"
    error = record.error or ""
    found = re.match(rf"the provider \(\w+\) answered {answer} to (\d+) of (\d+) requests?: ", error)
    assert found, error
    assert not record.success and record.outcome == outcome, (record.outcome, record.error)
    assert int(found[1]) == int(found[2]) == len(model_server.requests), (error, len(model_server.requests))
    assert f"its last answer: {message}" in error
    if mode == "401":
        assert f"check {case.key_env}" in error
    assert "; then the agent" in error  # what the agent did after, second
    assert took < TIMEOUT_SEC + 120, f"the run took {took:.0f} s"  # its time limit, and set up around it
    # the same verdict in the run's log, where `pier run` and the web UI read it
    log = [e.line for e in Services(get_settings()).store.events(record.trajectory_id)]
    assert any(line.endswith(error) and " failed: " in line for line in log)
    seen = record.outputs.usage["gateway"]
    assert seen["answers"] == {mode: len(model_server.requests)}
    # the 401 quotes the refused key back: pier keeps it nowhere (error, usage, log, files)
    assert env[case.key_env] not in stored_text(record)


def test_a_provider_reporting_its_own_cost_is_the_runs_cost(agent_image, model_server):
    """OpenRouter reports `usage.cost`: the record's cost is the provider's, summed
    over every call, and says so; claude-code's own estimate is kept beside it."""
    case = BY_ID["claude-code-openrouter"]
    model_server.cost = 0.0123

    record = start(runbook_text(case), agent_image, env_for(case, model_server))

    assert record.success, record.error
    usage = record.outputs.usage
    generations = [c for c in model_server.model_calls() if is_generation(c.path)]
    assert usage["cost_usd"] == pytest.approx(0.0123 * len(generations))
    assert usage["cost_source"] == "provider" and usage["source"] == "gateway"
    assert "agent_reported" in usage and usage["agent_reported"] != usage["gateway"]


def test_opencodes_title_request_is_counted(agent_image, model_server):
    """opencode's record left out its title request (record 4444/666, provider
    4499/673): the record's tokens are every request the provider answered."""
    case = BY_ID["opencode-default"]

    record = start(runbook_text(case), agent_image, env_for(case, model_server))

    assert record.success, record.error
    generations = [c for c in model_server.model_calls() if is_generation(c.path)]
    untooled = [c for c in generations if not (isinstance(c.body, dict) and c.body.get("tools"))]
    assert untooled, "opencode made no title request: nothing to count"
    usage = record.outputs.usage
    assert usage["api_calls"] == len(generations)
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (
        100 * len(generations),
        20 * len(generations),
    )
    reported = usage.get("agent_reported") or {}
    assert reported.get("prompt_tokens", 0) < usage["prompt_tokens"], reported


def test_claude_codes_atif_steps_add_up_to_its_totals(agent_image, model_server):
    """claude-code's stream-json says output_tokens 1 where the provider sent 20:
    the steps' metrics are the gateway's, and add up to final_metrics."""
    case = BY_ID["claude-code-default"]

    record = start(runbook_text(case), agent_image, env_for(case, model_server))

    assert record.success, record.error
    found = run_trajectory(Services(get_settings()).storage, record)
    assert found is not None
    data = found.model_dump(mode="json", exclude_none=True)
    agents = [s for s in data["steps"] if s["source"] == "agent"]
    final = data["final_metrics"]
    generations = [c for c in model_server.model_calls() if is_generation(c.path)]
    assert final["total_completion_tokens"] == 20 * len(generations)
    assert (
        sum(s.get("metrics", {}).get("completion_tokens", 0) for s in agents)
        == final["total_completion_tokens"]
    )
    assert sum(s.get("metrics", {}).get("prompt_tokens", 0) for s in agents) == final["total_prompt_tokens"]
    assert any(s.get("tool_calls") and s["metrics"]["completion_tokens"] == 20 for s in agents), agents
    assert run_folder(record).is_dir()
