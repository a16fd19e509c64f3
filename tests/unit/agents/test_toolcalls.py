"""The tool calls each agent CLI's transcript shows (real streams, in
streams/), as the trace's execute_tool spans take them: the ids and names the
ATIF trajectory gives the same calls, the transcript's own times where it has
them, else when pier read the lines; a failed result names its error."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pier.agents.atif import trajectory
from pier.agents.toolcalls import TOOL_ERROR, ToolCalls

STREAMS = Path(__file__).parent / "streams"


def read(agent: str, text: str | None = None, at: datetime | None = None) -> ToolCalls:
    calls = ToolCalls(agent)
    for line in (text if text is not None else (STREAMS / f"{agent}.jsonl").read_text()).splitlines():
        calls.line(line, at)
    return calls


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_the_calls_are_those_of_the_atif_trajectory(agent):
    stream = (STREAMS / f"{agent}.jsonl").read_text()
    steps = trajectory("t", agent, "1", None, stream).steps
    atif = [(c.tool_call_id, c.function_name) for s in steps for c in s.tool_calls or []]
    found = [(c.call_id, c.name) for c in read(agent).calls()]
    assert found == atif and found


@pytest.mark.parametrize(
    ("agent", "started", "ended"),
    [
        ("claude-code", "2026-11-30T09:55:13.527+00:00", "2026-11-30T09:55:13.575+00:00"),
        ("gemini-cli", "2026-11-30T09:56:54.204+00:00", "2026-11-30T09:56:54.247+00:00"),
        ("opencode", "2026-11-30T09:56:40.290+00:00", "2026-11-30T09:56:40.323+00:00"),
    ],
)
def test_a_call_takes_the_transcripts_own_times(agent, started, ended):
    (call,) = read(agent, at=datetime(2030, 1, 1, tzinfo=UTC)).calls()
    assert (call.started, call.ended) == (datetime.fromisoformat(started), datetime.fromisoformat(ended))
    assert call.error is None


def test_without_timestamps_a_call_is_timed_by_when_its_lines_were_read():
    calls = ToolCalls("codex")
    started, ended = datetime(2026, 1, 1, 10, tzinfo=UTC), datetime(2026, 1, 1, 10, 0, 3, tzinfo=UTC)
    item = {"id": "item_7", "type": "command_execution", "command": "false", "aggregated_output": ""}
    calls.line(json.dumps({"type": "item.started", "item": {**item, "status": "in_progress"}}), started)
    calls.line(
        json.dumps({"type": "item.completed", "item": {**item, "exit_code": 1, "status": "failed"}}), ended
    )
    (call,) = calls.calls()
    assert (call.call_id, call.name, call.started, call.ended) == ("item_7", "shell", started, ended)
    assert call.error == TOOL_ERROR


def test_a_failed_tool_result_is_an_error_and_other_agents_show_no_calls():
    use = {
        "type": "assistant",
        "message": {"id": "m1", "content": [{"type": "tool_use", "id": "t1", "name": "Bash"}]},
    }
    result = {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True}]},
    }
    (call,) = read("claude-code", json.dumps(use) + "\n" + json.dumps(result)).calls()
    assert call.error == TOOL_ERROR
    assert read("script", json.dumps(use)).calls() == []
