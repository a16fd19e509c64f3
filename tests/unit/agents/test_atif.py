"""Agent transcripts as ATIF trajectories: the real streams of claude-code and
codex (tests/unit/agents/streams) converted, then checked twice: by the
models (the RFC's required fields and rules) and, as JSON, by the JSON Schema
those models publish, with jsonschema (a validator that is not pydantic)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from pier.agents.atif import SCHEMA_VERSION, Trajectory, trajectory

STREAMS = Path(__file__).parent / "streams"
SCHEMA = Trajectory.model_json_schema()


def as_json(found: Trajectory) -> dict[str, Any]:
    data = json.loads(json.dumps(found.model_dump(mode="json", exclude_none=True)))
    jsonschema.validate(data, SCHEMA)
    return data


def test_claude_code_stream_becomes_steps_with_tool_calls_and_their_results() -> None:
    found = trajectory("run-1", "claude-code", "2.1.332", None, (STREAMS / "claude-code.jsonl").read_text(),
                       instruction="Write the answer.", usage={"prompt_tokens": 200, "completion_tokens": 2,
                                                               "cost_usd": 0.01})  # fmt: skip
    data = as_json(found)
    assert data["schema_version"] == SCHEMA_VERSION and data["session_id"] == "run-1"
    steps = data["steps"]
    assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
    assert steps[0] == {"step_id": 1, "source": "user", "message": "Write the answer."}
    call = steps[1]["tool_calls"][0]
    assert call["function_name"] == "Write" and call["arguments"]["file_path"] == "/app/results/answer.md"
    (result,) = steps[1]["observation"]["results"]
    assert result["source_call_id"] == call["tool_call_id"] and "File created" in result["content"]
    assert steps[-1]["message"] == "Done: the answer is in /app/results/answer.md."
    assert steps[1]["model_name"] == "claude-sonnet-4-5"
    assert data["final_metrics"] == {"total_prompt_tokens": 200, "total_completion_tokens": 2,
                                     "total_cost_usd": 0.01, "total_steps": len(steps)}  # fmt: skip


def test_codex_stream_becomes_shell_calls_messages_and_turn_metrics() -> None:
    data = as_json(trajectory("run-2", "codex", "0.171.0", "gpt-5", (STREAMS / "codex.jsonl").read_text()))
    steps = data["steps"]
    assert data["agent"] == {"name": "codex", "version": "0.171.0", "model_name": "gpt-5"}
    shell = steps[0]
    assert shell["tool_calls"][0]["function_name"] == "shell"
    assert "/app/results/answer.md" in shell["tool_calls"][0]["arguments"]["command"]
    assert shell["observation"]["results"][0]["source_call_id"] == shell["tool_calls"][0]["tool_call_id"]
    assert steps[-1]["message"].startswith("Done:")
    assert steps[-1]["metrics"] == {"prompt_tokens": 200, "completion_tokens": 40, "cached_tokens": 0}


@pytest.mark.parametrize("agent", ["opencode", "gemini-cli", "script"])
def test_other_agents_become_one_agent_step_holding_their_output(agent: str) -> None:
    stream = (STREAMS / f"{agent}.jsonl").read_text() if (STREAMS / f"{agent}.jsonl").exists() else "ok\n"
    data = as_json(trajectory("run-3", agent, "1", None, stream, instruction="go"))
    assert [s["source"] for s in data["steps"]] == ["user", "agent"]
    assert data["steps"][1]["message"] == stream


def valid() -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION, "session_id": "s", "agent": {"name": "a", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "hi"},
            {"step_id": 2, "source": "agent", "message": "", "tool_calls": [
                {"tool_call_id": "c1", "function_name": "f", "arguments": {}}],
             "observation": {"results": [{"source_call_id": "c1", "content": "out"}]}},
        ],
    }  # fmt: skip


def broken(change: str) -> dict[str, Any]:
    data = valid()
    if change == "step ids":
        data["steps"][1]["step_id"] = 3
    elif change == "agent field on a user step":
        data["steps"][0]["model_name"] = "m"
    elif change == "observation of an unknown call":
        data["steps"][1]["observation"]["results"][0]["source_call_id"] = "c9"
    elif change == "unknown field":
        data["steps"][0]["role"] = "user"
    elif change == "no message":
        del data["steps"][0]["message"]
    elif change == "bad source":
        data["steps"][0]["source"] = "tool"
    elif change == "no agent version":
        del data["agent"]["version"]
    return data


def test_a_valid_trajectory_passes_both_checks() -> None:
    jsonschema.validate(valid(), SCHEMA)
    Trajectory.model_validate(valid())


@pytest.mark.parametrize("change", ["step ids", "agent field on a user step", "observation of an unknown call",
                                    "unknown field", "no message", "bad source", "no agent version"])  # fmt: skip
def test_what_the_rfc_forbids_is_refused(change: str) -> None:
    with pytest.raises(ValidationError):
        Trajectory.model_validate(broken(change))


def _assistant(message_id: str, block: dict[str, Any]) -> str:
    usage = {"input_tokens": 100, "output_tokens": 1}  # stream-json's partial count, as claude-code writes it
    message = {"id": message_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
               "content": [block], "usage": usage}  # fmt: skip
    return json.dumps({"type": "assistant", "message": message})


def test_claude_code_steps_take_the_gateways_figures_and_add_up_to_the_totals() -> None:
    """claude-code's stream-json says output_tokens 1 for answers of 222 and 444
    tokens, and does not show its haiku quota call: with the gateway's calls on
    the run's usage, each step has its call's figures, the unseen call is a step
    of its own, and the steps add up to final_metrics."""
    tool = {"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {"file_path": "/app/results/a.md"}}
    result = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "File created"}]}}  # fmt: skip
    stream = "\n".join([_assistant("msg_a", tool), json.dumps(result),
                        _assistant("msg_b", {"type": "text", "text": "Done."})])  # fmt: skip
    calls = [
        {"id": "msg_q", "model": "claude-haiku-4-5", "prompt_tokens": 10, "completion_tokens": 1,
         "cached_tokens": 0, "cost_usd": 0.00001},
        {"id": "msg_a", "model": "claude-sonnet-4-5", "prompt_tokens": 1500, "completion_tokens": 222,
         "cached_tokens": 1000, "cost_usd": 0.0111},
        {"id": "msg_b", "model": "claude-sonnet-4-5", "prompt_tokens": 1800, "completion_tokens": 444,
         "cached_tokens": 1500, "cost_usd": 0.0135},
    ]  # fmt: skip
    gateway = {"prompt_tokens": 3310, "completion_tokens": 667, "cached_tokens": 2500, "cost_usd": 0.02461,
               "calls": calls}  # fmt: skip
    usage = {**{k: v for k, v in gateway.items() if k != "calls"}, "source": "gateway", "gateway": gateway}
    data = as_json(
        trajectory("run-3", "claude-code", "2.1.332", None, stream, instruction="Go.", usage=usage)
    )
    agents = [s for s in data["steps"] if s["source"] == "agent"]
    assert [s["metrics"]["completion_tokens"] for s in agents] == [222, 444, 1]
    assert agents[-1]["extra"]["message_id"] == "msg_q" and agents[-1]["model_name"] == "claude-haiku-4-5"
    final = data["final_metrics"]
    assert sum(s["metrics"]["prompt_tokens"] for s in agents) == final["total_prompt_tokens"] == 3310
    assert sum(s["metrics"]["completion_tokens"] for s in agents) == final["total_completion_tokens"] == 667
    assert sum(s["metrics"]["cached_tokens"] for s in agents) == final["total_cached_tokens"] == 2500
    assert sum(s["metrics"]["cost_usd"] for s in agents) == pytest.approx(final["total_cost_usd"])
    assert [s["step_id"] for s in data["steps"]] == list(range(1, len(data["steps"]) + 1))
