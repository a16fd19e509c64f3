"""The four wire formats the scripted model server speaks: reading the tools and
tool results out of a request, and writing a turn as a response or an SSE stream."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.support.model_script import Text, ToolCall, Turn

USAGE_IN, USAGE_OUT = 100, 20
Event = tuple[str | None, Any]


def api_of(path: str) -> str | None:
    if "/models/" in path and ":" in path.rsplit("/", 1)[-1]:
        return "gemini"
    if path.endswith("/messages") or path.endswith("/messages/count_tokens"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    return None


def tools_of(api: str, body: dict) -> dict[str, dict]:
    tools = body.get("tools") or []
    found: dict[str, dict] = {}
    for tool in tools:
        if api == "anthropic" and "name" in tool:
            found[tool["name"]] = tool.get("input_schema") or {}
        elif api == "chat" and "function" in tool:
            found[tool["function"]["name"]] = tool["function"].get("parameters") or {}
        elif api == "responses" and tool.get("name"):
            found[tool["name"]] = tool.get("parameters") or {}
        elif api == "gemini":
            for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
                found[decl["name"]] = decl.get("parametersJsonSchema") or decl.get("parameters") or {}
    return found


def has_tool_result(api: str, body: dict) -> bool:
    if api == "anthropic":
        return any(
            isinstance(m.get("content"), list) and any(b.get("type") == "tool_result" for b in m["content"])
            for m in body.get("messages") or []
        )
    if api == "chat":
        return any(m.get("role") == "tool" for m in body.get("messages") or [])
    if api == "responses":
        items = body.get("input") if isinstance(body.get("input"), list) else []
        return any(str(i.get("type", "")).endswith("_output") for i in items)
    return any("functionResponse" in p for c in body.get("contents") or [] for p in c.get("parts") or [])


def wants_stream(api: str, path: str, body: dict) -> bool:
    return ":streamGenerateContent" in path if api == "gemini" else bool(body.get("stream"))


def response(api: str, turn: Turn, model: str) -> dict:
    return {"anthropic": _anthropic, "chat": _chat, "responses": _responses, "gemini": _gemini}[api](
        turn, model
    )


def stream_events(api: str, turn: Turn, model: str) -> list[Event]:
    if api == "anthropic":
        return _anthropic_stream(turn, model)
    if api == "chat":
        return _chat_stream(turn, model)
    if api == "responses":
        return _responses_stream(turn, model)
    return [(None, _gemini(turn, model))]


# Anthropic Messages


def _anthropic_block(turn: Turn) -> dict:
    if isinstance(turn, ToolCall):
        return {"type": "tool_use", "id": "toolu_pier_1", "name": turn.name, "input": turn.arguments}
    return {"type": "text", "text": turn.text}


def _anthropic_usage() -> dict:
    return {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT, "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0}  # fmt: skip


def _anthropic(turn: Turn, model: str) -> dict:
    return {
        "id": f"msg_{uuid.uuid4().hex[:16]}", "type": "message", "role": "assistant", "model": model,
        "content": [_anthropic_block(turn)], "stop_sequence": None, "usage": _anthropic_usage(),
        "stop_reason": "tool_use" if isinstance(turn, ToolCall) else "end_turn",
    }  # fmt: skip


def _anthropic_stream(turn: Turn, model: str) -> list[Event]:
    message = {**_anthropic(turn, model), "content": [], "stop_reason": None}
    message["usage"] = {**_anthropic_usage(), "output_tokens": 1}
    block = _anthropic_block(turn)
    if isinstance(turn, ToolCall):
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": turn.arguments_json}
    else:
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": turn.text}
    stop = "tool_use" if isinstance(turn, ToolCall) else "end_turn"
    return [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": USAGE_OUT}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


# OpenAI Chat Completions


def _chat_usage() -> dict:
    return {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT, "total_tokens": USAGE_IN + USAGE_OUT}


def _chat_message(turn: Turn) -> dict:
    if isinstance(turn, ToolCall):
        call = {"id": turn.call_id, "type": "function",
                "function": {"name": turn.name, "arguments": turn.arguments_json}}  # fmt: skip
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": turn.text}


def _finish(turn: Turn) -> str:
    return "tool_calls" if isinstance(turn, ToolCall) else "stop"


def _chat(turn: Turn, model: str) -> dict:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:16]}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": _chat_message(turn), "finish_reason": _finish(turn)}],
        "usage": _chat_usage(),
    }  # fmt: skip


def _chat_stream(turn: Turn, model: str) -> list[Event]:
    head = {
        "id": "chatcmpl-pier",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    message = _chat_message(turn)
    if isinstance(turn, ToolCall):
        message["tool_calls"] = [{"index": 0, **message["tool_calls"][0]}]
    first = {**head, "choices": [{"index": 0, "delta": message, "finish_reason": None}]}
    last = {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": _finish(turn)}]}
    usage = {**head, "choices": [], "usage": _chat_usage()}
    return [(None, first), (None, last), (None, usage), (None, "[DONE]")]


# OpenAI Responses


def _responses_item(turn: Turn) -> dict:
    if isinstance(turn, ToolCall):
        return {"type": "function_call", "id": "fc_pier_1", "call_id": turn.call_id, "name": turn.name,
                "arguments": turn.arguments_json, "status": "completed"}  # fmt: skip
    return {"type": "message", "id": "msg_pier_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": turn.text, "annotations": []}]}  # fmt: skip


def _responses(turn: Turn, model: str) -> dict:
    usage = {"input_tokens": USAGE_IN, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": USAGE_OUT, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": USAGE_IN + USAGE_OUT}  # fmt: skip
    return {"id": f"resp_{uuid.uuid4().hex[:16]}", "object": "response", "created_at": int(time.time()), "model": model,
            "status": "completed", "output": [_responses_item(turn)], "usage": usage}  # fmt: skip


def _responses_stream(turn: Turn, model: str) -> list[Event]:
    done = _responses(turn, model)
    created = {**done, "status": "in_progress", "output": [], "usage": None}
    item = done["output"][0]
    events: list[Event] = [
        ("response.created", {"type": "response.created", "response": created}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                        "item": {**item, "status": "in_progress"}}),
    ]  # fmt: skip
    if isinstance(turn, Text):
        events.append(("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0,
                       "content_index": 0, "item_id": item["id"], "delta": turn.text}))  # fmt: skip
    events += [
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": done}),
    ]
    return events


# Gemini


def _gemini(turn: Turn, model: str) -> dict:
    part = {"functionCall": {"name": turn.name, "args": turn.arguments}} if isinstance(turn, ToolCall) \
        else {"text": turn.text}  # fmt: skip
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": USAGE_IN, "candidatesTokenCount": USAGE_OUT,
                          "totalTokenCount": USAGE_IN + USAGE_OUT},
        "modelVersion": model,
    }  # fmt: skip
