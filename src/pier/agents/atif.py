"""ATIF, the Agent Trajectory Interchange Format (v1.4), as pydantic models, and
the conversion of pier's agent transcripts into it.

The models are written from the format's RFC, "RFC: Agent Trajectory
Interchange Format (ATIF) Specification" by Boxuan Li (docs/rfcs/0001-trajectory-format.md
in the public Harbor project, https://github.com/harbor-framework/harbor, Apache-2.0),
whose reference implementation is Harbor's own pydantic models. Harbor needs
Python 3.12 and brings its whole framework, so the schema lives here: required
fields as the RFC's tables mark them, unknown fields refused, and the RFC's
rules checked (step ids 1, 2, 3 ...; agent-only fields only on agent steps; an
observation result names a tool call of its own step).

Each agent's transcript is the stream it wrote to /logs/agent: claude-code's
stream-json events and codex's `exec --json` events are read turn by turn;
another agent's stream becomes one agent step holding its text.

Per-step metrics come from what pier's gateway measured on each model call
(the run's `usage.gateway.calls`), the source of the run's totals, so the
steps add up to `final_metrics`: a step whose message id names a call takes
that call's figures; a call no step names (a title or quota request, a retry)
is a step of its own. Without the gateway, the transcript's own figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = "ATIF-v1.4"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentSchema(_Model):
    name: str
    version: str
    model_name: str | None = None
    extra: dict[str, Any] | None = None


class ToolCall(_Model):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]


class SubagentTrajectoryRef(_Model):
    session_id: str
    trajectory_path: str | None = None
    extra: dict[str, Any] | None = None


class ObservationResult(_Model):
    source_call_id: str | None = None
    content: str | None = None
    subagent_trajectory_ref: list[SubagentTrajectoryRef] | None = None


class Observation(_Model):
    results: list[ObservationResult]


class Metrics(_Model):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None


class FinalMetrics(_Model):
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = None
    extra: dict[str, Any] | None = None


AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


class Step(_Model):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: str
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _rules(self) -> Step:
        if self.source != "agent":
            used = [name for name in AGENT_ONLY if getattr(self, name) is not None]
            if used:
                raise ValueError(f"step {self.step_id}: {', '.join(used)} only apply to agent steps")
        calls = {c.tool_call_id for c in self.tool_calls or []}
        for result in self.observation.results if self.observation else []:
            if result.source_call_id is not None and result.source_call_id not in calls:
                raise ValueError(f"step {self.step_id}: observation names tool call {result.source_call_id!r}, "
                                 "which the step does not make")  # fmt: skip
        return self


class Trajectory(_Model):
    schema_version: str
    session_id: str
    agent: AgentSchema
    steps: list[Step]
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _ordinal(self) -> Trajectory:
        for number, step in enumerate(self.steps, 1):
            if step.step_id != number:
                raise ValueError(f"steps[{number - 1}].step_id is {step.step_id}: step ids run 1, 2, 3 ...")
        return self


# converting transcripts


def _events(stream: str) -> Iterable[dict[str, Any]]:
    for line in stream.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            yield data


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict) and "text" in c)
    return "" if content is None else json.dumps(content)


class _Steps:
    """Steps as they are read, numbered in order."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []

    def add(self, source: str, message: str, **fields: Any) -> dict[str, Any]:
        step = {"step_id": len(self.steps) + 1, "source": source, "message": message}
        step.update({k: v for k, v in fields.items() if v is not None})
        self.steps.append(step)
        return step


def claude_code_steps(stream: str, instruction: str | None) -> list[dict[str, Any]]:
    """claude-code's stream-json: an assistant event is an agent step (its text,
    thinking and tool_use blocks); the user event after it carries the tool
    results, which become that step's observation."""
    steps = _Steps()
    if instruction:
        steps.add("user", instruction)
    last: dict[str, Any] | None = None
    last_id: object = None
    for data in _events(stream):
        message = data.get("message") or {}
        content = message.get("content")
        blocks: list[Any] = content if isinstance(content, list) else []
        if data.get("type") == "assistant" and last is not None and message.get("id") == last_id:
            _claude_more(last, blocks)  # one message streamed as several events: one step
        elif data.get("type") == "assistant":
            last, last_id = _claude_turn(steps, message, blocks), message.get("id")
        elif data.get("type") == "user" and last is not None:
            results = [
                {"source_call_id": b.get("tool_use_id"), "content": _text(b.get("content"))}
                for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"
            ]  # fmt: skip
            known = {c["tool_call_id"] for c in last.get("tool_calls", [])}
            results = [r if r["source_call_id"] in known else {**r, "source_call_id": None} for r in results]
            if results:
                last.setdefault("observation", {"results": []})["results"].extend(results)
    return steps.steps


def _claude_blocks(blocks: list[Any]) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """(text, thinking, tool calls) of an assistant message's content blocks."""
    text = [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    thinking = [b.get("thinking", "") for b in blocks if isinstance(b, dict) and b.get("type") == "thinking"]
    calls = [
        {"tool_call_id": str(b.get("id")), "function_name": str(b.get("name")),
         "arguments": b.get("input") if isinstance(b.get("input"), dict) else {"input": b.get("input")}}
        for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
    ]  # fmt: skip
    return text, thinking, calls


def _claude_more(step: dict[str, Any], blocks: list[Any]) -> None:
    text, thinking, calls = _claude_blocks(blocks)
    if text:
        step["message"] = "\n".join([step["message"], *text]).strip("\n")
    if thinking:
        step["reasoning_content"] = "\n".join([step.get("reasoning_content") or "", *thinking]).strip("\n")
    if calls:
        step.setdefault("tool_calls", []).extend(calls)


def _claude_turn(steps: _Steps, message: dict[str, Any], blocks: list[Any]) -> dict[str, Any]:
    text, thinking, calls = _claude_blocks(blocks)
    usage = message.get("usage") or {}
    cached = int(usage.get("cache_read_input_tokens") or 0)
    prompt = int(usage.get("input_tokens") or 0) + cached + int(usage.get("cache_creation_input_tokens") or 0)
    metrics = {"prompt_tokens": prompt, "completion_tokens": int(usage.get("output_tokens") or 0),
               "cached_tokens": cached} if usage else None  # fmt: skip
    ids = {"message_id": message["id"]} if isinstance(message.get("id"), str) else None
    return steps.add(
        "agent", "\n".join(text), model_name=message.get("model"),
        reasoning_content="\n".join(thinking) or None, tool_calls=calls or None, metrics=metrics, extra=ids,
    )  # fmt: skip


def codex_steps(stream: str, instruction: str | None) -> list[dict[str, Any]]:
    """codex `exec --json`: each completed item is a step: an agent message, a
    reasoning item (kept as the next message's reasoning), a command (a tool
    call with its output as the observation); a turn's usage goes on its last step."""
    steps = _Steps()
    if instruction:
        steps.add("user", instruction)
    reasoning: list[str] = []
    turn_first = len(steps.steps)
    for data in _events(stream):
        item = data.get("item") or {}
        kind = data.get("type")
        if kind == "item.completed":
            _codex_item(steps, item, reasoning)
        elif kind == "turn.completed":
            usage = data.get("usage") or {}
            agents = [s for s in steps.steps[turn_first:] if s["source"] == "agent"]
            if agents:
                agents[-1]["metrics"] = {
                    "prompt_tokens": int(usage.get("input_tokens") or 0),
                    "completion_tokens": int(usage.get("output_tokens") or 0),
                    "cached_tokens": int(usage.get("cached_input_tokens") or 0),
                }
            turn_first = len(steps.steps)
    return steps.steps


def _codex_item(steps: _Steps, item: dict[str, Any], reasoning: list[str]) -> None:
    kind = item.get("type") or item.get("item_type")
    thought = "\n".join(reasoning) or None
    if kind == "reasoning":
        reasoning.append(str(item.get("text") or ""))
        return
    if kind in ("agent_message", "assistant_message"):
        steps.add("agent", str(item.get("text") or ""), reasoning_content=thought)
    elif kind == "command_execution":
        call_id = str(item.get("id") or f"call_{len(steps.steps) + 1}")
        steps.add(
            "agent", "", reasoning_content=thought,
            tool_calls=[{"tool_call_id": call_id, "function_name": "shell",
                         "arguments": {"command": item.get("command")}}],
            observation={"results": [{"source_call_id": call_id, "content": str(item.get("aggregated_output") or "")}]},
            extra={"exit_code": item.get("exit_code")} if item.get("exit_code") is not None else None,
        )  # fmt: skip
    elif kind in ("file_change", "mcp_tool_call", "web_search", "todo_list"):
        steps.add("agent", "", reasoning_content=thought, extra={"item": item})
    else:
        return
    reasoning.clear()


def text_steps(stream: str, instruction: str | None) -> list[dict[str, Any]]:
    """An agent whose stream pier does not read event by event: its output as one agent step."""
    steps = _Steps()
    if instruction:
        steps.add("user", instruction)
    steps.add("agent", stream)
    return steps.steps


CONVERTERS = {"claude-code": claude_code_steps, "codex": codex_steps}
UNSEEN_CALL = "a model request the transcript does not show (a title, a quota check or a retry)"


def gateway_metrics(steps: list[dict[str, Any]], calls: list[Any]) -> list[dict[str, Any]]:
    """steps with each agent step's metrics from the gateway's call of the same
    message id (none when no call is its), and the calls no step names as agent
    steps of their own, after them: the steps add up to the gateway's totals."""
    by_id = {c["id"]: c for c in calls if isinstance(c, dict) and c.get("id")}
    used: set[str] = set()
    for step in steps:
        if step["source"] != "agent":
            continue
        found = by_id.get((step.get("extra") or {}).get("message_id"))
        if found is not None and found["id"] not in used:
            used.add(found["id"])
            step["metrics"] = _call_metrics(found)
        else:
            step.pop("metrics", None)
    for call in calls:
        if isinstance(call, dict) and call.get("id") not in used:
            extra = {"pier": UNSEEN_CALL, **({"message_id": call["id"]} if call.get("id") else {})}
            step = {
                "step_id": 0,
                "source": "agent",
                "message": "",
                "metrics": _call_metrics(call),
                "extra": extra,
            }
            if call.get("model"):
                step["model_name"] = call["model"]
            steps.append(step)
    for number, step in enumerate(steps, 1):
        step["step_id"] = number
    return steps


def _call_metrics(call: dict[str, Any]) -> dict[str, Any]:
    found = {"prompt_tokens": call.get("prompt_tokens"), "completion_tokens": call.get("completion_tokens"),
             "cached_tokens": call.get("cached_tokens"), "cost_usd": call.get("cost_usd")}  # fmt: skip
    return {k: v for k, v in found.items() if v is not None}


def trajectory(
    session_id: str, agent: str, version: str, model: str | None, stream: str,
    instruction: str | None = None, usage: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
) -> Trajectory:  # fmt: skip
    """The ATIF trajectory of one run's transcript, validated."""
    steps = CONVERTERS.get(agent, text_steps)(stream, instruction)
    usage = usage or {}
    calls = (usage.get("gateway") or {}).get("calls")
    if isinstance(calls, list) and calls:
        steps = gateway_metrics(steps, calls)
    totals = {
        "total_prompt_tokens": usage.get("prompt_tokens"),
        "total_completion_tokens": usage.get("completion_tokens"),
        "total_cached_tokens": usage.get("cached_tokens"),
        "total_cost_usd": usage.get("cost_usd"),
        "total_steps": len(steps),
    }
    return Trajectory.model_validate({
        "schema_version": SCHEMA_VERSION, "session_id": session_id,
        "agent": {"name": agent, "version": version, "model_name": model},
        "steps": steps,
        "final_metrics": {k: v for k, v in totals.items() if v is not None},
        "extra": extra,
    })  # fmt: skip
