"""The tool calls an agent CLI's transcript shows, timed, for the run's trace
(one `execute_tool` span each, under the agent's span).

The transcript is read line by line as the CLI writes it. A call's times are
the transcript's own where it has them (gemini-cli's and opencode's events
carry timestamps; opencode also the tool's start and end), else the moments
pier read the call's line and its result's line. The ids and names are those
the ATIF trajectory gives the same calls (pier.agents.atif): claude-code's
`tool_use` blocks, codex's commands (`shell`) and MCP calls. Only names, ids
and times are kept: never a tool's arguments or output.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

TOOL_ERROR = "tool_error"  # error.type of a call whose result says it failed
Reader = Callable[["ToolCalls", dict[str, Any], datetime], None]


@dataclass
class ToolUse:
    call_id: str
    name: str
    started: datetime
    ended: datetime | None = None
    error: str | None = None  # error.type when its result says it failed


class ToolCalls:
    """Reads one agent's output lines (`line`) and keeps its tool calls, in the
    order they started (`calls`). An agent whose stream pier does not read
    event by event (the script agent, hermes) shows none."""

    def __init__(self, agent: str) -> None:
        found = _READERS.get(agent)
        self._read: Reader | None = found[0] if found else None
        self._marks: tuple[str, ...] = found[1] if found else ()
        self._calls: dict[str, ToolUse] = {}

    def line(self, text: str, at: datetime | None = None) -> None:
        # Most lines are text, thinking or usage: a substring test spares parsing them twice.
        if self._read is None or not any(mark in text for mark in self._marks):
            return
        try:
            event = json.loads(text)
        except ValueError:
            return
        if isinstance(event, dict):
            self._read(self, event, at or datetime.now(UTC))

    def calls(self) -> list[ToolUse]:
        return list(self._calls.values())

    def _start(self, call_id: Any, name: Any, at: datetime) -> None:
        if isinstance(call_id, str) and call_id and call_id not in self._calls:
            self._calls[call_id] = ToolUse(call_id, str(name or "tool"), at)

    def _end(self, call_id: Any, at: datetime, failed: bool) -> None:
        found = self._calls.get(call_id) if isinstance(call_id, str) else None
        if found is not None and found.ended is None:
            found.ended = max(at, found.started)
            found.error = TOOL_ERROR if failed else None


def _when(value: Any, default: datetime) -> datetime:
    """A transcript's timestamp (ISO 8601, or epoch milliseconds), else `default`."""
    if isinstance(value, int | float) and value > 0:
        return datetime.fromtimestamp(value / 1000, UTC)
    if isinstance(value, str) and value:
        try:
            found = datetime.fromisoformat(value)
        except ValueError:
            return default
        return found if found.tzinfo else found.replace(tzinfo=UTC)
    return default


def _blocks(event: dict[str, Any]) -> list[dict[str, Any]]:
    content = (event.get("message") or {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _claude_code(calls: ToolCalls, event: dict[str, Any], at: datetime) -> None:
    """stream-json: an assistant message's `tool_use` blocks start calls; the
    next user message's `tool_result` blocks end them (`is_error` a failure)."""
    at = _when(event.get("timestamp"), at)
    if event.get("type") == "assistant":
        for block in _blocks(event):
            if block.get("type") == "tool_use":
                calls._start(block.get("id"), block.get("name"), at)
    elif event.get("type") == "user":
        for block in _blocks(event):
            if block.get("type") == "tool_result":
                calls._end(block.get("tool_use_id"), at, bool(block.get("is_error")))


def _codex(calls: ToolCalls, event: dict[str, Any], at: datetime) -> None:
    """exec --json: a command or MCP call is an item, started then completed."""
    item = event.get("item") or {}
    kind = item.get("type") or item.get("item_type")
    if kind == "command_execution":
        name = "shell"
    elif kind == "mcp_tool_call":
        name = item.get("tool") or "mcp"
    else:
        return
    at = _when(event.get("timestamp"), at)
    if event.get("type") == "item.started":
        calls._start(item.get("id"), name, at)
    elif event.get("type") == "item.completed":
        calls._start(item.get("id"), name, at)  # seen only completed: it took no time pier could see
        code = item.get("exit_code")
        calls._end(
            item.get("id"), at, item.get("status") == "failed" or (isinstance(code, int) and code != 0)
        )


def _gemini_cli(calls: ToolCalls, event: dict[str, Any], at: datetime) -> None:
    """--output-format stream-json: `tool_use` and `tool_result` events, timestamped."""
    at = _when(event.get("timestamp"), at)
    if event.get("type") == "tool_use":
        calls._start(event.get("tool_id"), event.get("tool_name"), at)
    elif event.get("type") == "tool_result":
        calls._end(event.get("tool_id"), at, event.get("status") not in (None, "success"))


def _opencode(calls: ToolCalls, event: dict[str, Any], at: datetime) -> None:
    """run --format json: a `tool_use` event holds the finished call, its times in `state.time`."""
    part = event.get("part") or {}
    if event.get("type") != "tool_use" or not isinstance(part, dict):
        return
    state = part.get("state") or {}
    times = state.get("time") or {}
    seen = _when(event.get("timestamp"), at)
    call_id = part.get("callID") or part.get("id")
    calls._start(call_id, part.get("tool"), _when(times.get("start"), seen))
    if state.get("status") in ("completed", "error"):
        calls._end(call_id, _when(times.get("end"), seen), state.get("status") == "error")


# Each reader, and what a line must hold to be one it reads.
_READERS: dict[str, tuple[Reader, tuple[str, ...]]] = {
    "claude-code": (_claude_code, ('"tool_use"', '"tool_result"')),
    "codex": (_codex, ('"command_execution"', '"mcp_tool_call"')),
    "gemini-cli": (_gemini_cli, ('"tool_use"', '"tool_result"')),
    "opencode": (_opencode, ('"tool_use"',)),
}
