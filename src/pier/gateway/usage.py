"""Usage read from what a model API answered: tokens from the JSON body or the SSE
stream of the four wire formats pier's agents speak (Anthropic Messages, OpenAI
Chat Completions and Responses, Gemini), and the price of those tokens.

Streams report usage in pieces (Anthropic: input in message_start, output in
message_delta) or repeat running totals (Gemini), so one response's usage is the
largest value seen for each count. A provider's own reported cost (OpenRouter's
`usage.cost`) wins over a computed one; genai-prices computes the others."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price
from httpx_sse import EventSource

log = logging.getLogger(__name__)

# Paths whose answers carry usage; others (model lists, token counts) do not.
_GENERATION_ENDS = (
    "/messages",
    "/chat/completions",
    "/responses",
    ":generateContent",
    ":streamGenerateContent",
)
# genai-prices names Google's API "google"; pier's provider names otherwise match.
_PRICE_PROVIDER = {"bedrock": "aws"}


PROVIDER_COST, PRICE_TABLE = "provider", "price table"


@dataclass(frozen=True)
class CallUsage:
    """One model call's tokens and cost (None: no price known for the model);
    `cost_source` says where the cost came from (PROVIDER_COST: the provider
    reported it; PRICE_TABLE: genai-prices), `response_id` the id the provider
    gave its answer (a transcript's message id names the same call)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float | None = None
    cost_source: str | None = None
    response_id: str | None = None
    model: str | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def is_generation(path: str) -> bool:
    return path.rstrip("/").endswith(_GENERATION_ENDS)


def model_of(path: str, body: Any) -> str | None:
    """The model a request names: in its body, or (Gemini) in its path."""
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return body["model"]
    if "/models/" in path:
        return path.split("/models/", 1)[1].split(":", 1)[0] or None
    return None


def call_usage(content_type: str, body: bytes, provider: str, model: str | None) -> CallUsage | None:
    """The usage in one answer's body, priced; None when the body reports none."""
    found = [u for u in (_counts(obj) for obj in _objects(content_type, body)) if u is not None]
    if not found:
        return None
    prompt = max(u[0] for u in found)
    completion = max(u[1] for u in found)
    cached = max(u[2] for u in found)
    reported = [u[3] for u in found if u[3] is not None]
    cost = max(reported) if reported else price(provider, model, prompt, completion, cached)
    source = PROVIDER_COST if reported else (PRICE_TABLE if cost is not None else None)
    return CallUsage(prompt, completion, cached, cost, source, _response_id(content_type, body), model)


def _response_id(content_type: str, body: bytes) -> str | None:
    """The id of the provider's answer: Anthropic's message id, OpenAI's
    completion or response id, Gemini's responseId."""
    for obj in _objects(content_type, body):
        for holder in (obj, obj.get("message"), obj.get("response")):
            if isinstance(holder, dict):
                found = holder.get("id") or holder.get("responseId")
                if isinstance(found, str) and found:
                    return found
    return None


@dataclass(frozen=True)
class Answer:
    """What an answer says of itself, for the GenAI span: the model that
    answered (`gen_ai.response.model`), the answer's id and why each
    generation stopped (`gen_ai.response.finish_reasons`), as the provider
    words them (OpenAI `stop`, Anthropic `end_turn`, Gemini `STOP`; the
    Responses API's final status)."""

    model: str | None = None
    id: str | None = None
    finish_reasons: tuple[str, ...] = ()


def answer_of(content_type: str, body: bytes) -> Answer:
    """Read from one answer's body, streamed (SSE, a JSON array) or whole:
    the last word wins for the model, the first id found, every finish reason
    in the order the generations ended (one per choice or candidate)."""
    model: str | None = None
    reasons: dict[int, str] = {}
    for obj in _objects(content_type, body):
        found = _answer_model(obj)
        model = found or model
        for index, reason in _finish_reasons(obj):
            reasons[index] = reason
    ordered = tuple(reasons[index] for index in sorted(reasons))
    return Answer(model, _response_id(content_type, body), ordered)


def _answer_model(obj: dict) -> str | None:
    for holder in (obj, obj.get("message"), obj.get("response")):
        if isinstance(holder, dict):
            found = holder.get("model") or holder.get("modelVersion")  # Gemini: modelVersion
            if isinstance(found, str) and found:
                return found
    return None


def _finish_reasons(obj: dict) -> Iterator[tuple[int, str]]:
    """(generation index, reason) pairs one object of an answer names."""
    for key, field in (("choices", "finish_reason"), ("candidates", "finishReason")):  # OpenAI, Gemini
        items = obj.get(key)
        if isinstance(items, list):
            for number, item in enumerate(items):
                if isinstance(item, dict) and isinstance(item.get(field), str) and item[field]:
                    index = item.get("index")
                    yield (index if isinstance(index, int) else number), item[field]
    for holder in (obj, obj.get("message"), obj.get("delta")):  # Anthropic: the message, or message_delta
        if isinstance(holder, dict) and isinstance(holder.get("stop_reason"), str) and holder["stop_reason"]:
            yield 0, holder["stop_reason"]
    whole = obj if obj.get("object") == "response" else None
    for response in (obj.get("response"), whole):  # the Responses API: its final status, or why incomplete
        if isinstance(response, dict) and response.get("status") in ("completed", "incomplete", "failed"):
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            yield 0, str(reason or response["status"])


def error_message(body: bytes) -> str:
    """The message of a provider's error answer (every provider's JSON puts it
    in `error.message`, or `error` / `message`), else the start of its text."""
    data = _json(body)
    if isinstance(data, list) and data and isinstance(data[0], dict):  # Gemini may answer a list
        data = data[0]
    if isinstance(data, dict):
        inner = data.get("error")
        for found in (inner.get("message") if isinstance(inner, dict) else inner, data.get("message")):
            if isinstance(found, str) and found.strip():
                return found.strip()[:300]
    return body.decode("utf-8", "replace").strip()[:300]


def price(provider: str, model: str | None, prompt: int, completion: int, cached: int) -> float | None:
    """The list price of these tokens, or None when genai-prices does not know the model."""
    if not model:
        return None
    usage = PriceUsage(input_tokens=prompt, output_tokens=completion, cache_read_tokens=cached or None)
    try:
        result = calc_price(usage, model_ref=model, provider_id=_PRICE_PROVIDER.get(provider, provider))
    except (LookupError, ValueError) as exc:
        log.debug("no price for %s/%s: %s", provider, model, exc)
        return None
    return float(result.total_price)


def _objects(content_type: str, body: bytes) -> Iterator[dict]:
    """The JSON objects of a body: the body itself, the items of a JSON array
    (Gemini's non-SSE stream), or each SSE event's data."""
    if "text/event-stream" in content_type:
        response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
        for event in EventSource(response).iter_sse():
            yield from _dicts(_json(event.data))
        return
    yield from _dicts(_json(body))


def _json(data: str | bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _dicts(value: Any) -> Iterable[dict]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    return []


def _counts(obj: dict) -> tuple[int, int, int, float | None] | None:
    """(prompt, completion, cached prompt, reported cost) of one object, if it has usage."""
    gemini = obj.get("usageMetadata")
    if isinstance(gemini, dict):
        completion = _int(gemini, "candidatesTokenCount") + _int(gemini, "thoughtsTokenCount")
        return _int(gemini, "promptTokenCount"), completion, _int(gemini, "cachedContentTokenCount"), None
    usage = obj.get("usage")
    for holder in ("message", "response"):  # Anthropic message_start, Responses events
        inner = obj.get(holder)
        if not isinstance(usage, dict) and isinstance(inner, dict):
            usage = inner.get("usage")
    if not isinstance(usage, dict):
        return None
    cost = usage.get("cost")
    cost = float(cost) if isinstance(cost, int | float) else None
    if "prompt_tokens" in usage or "completion_tokens" in usage:  # Chat Completions
        cached = _int(usage.get("prompt_tokens_details") or {}, "cached_tokens")
        return _int(usage, "prompt_tokens"), _int(usage, "completion_tokens"), cached, cost
    if "input_tokens_details" in usage or "output_tokens_details" in usage:  # Responses
        cached = _int(usage.get("input_tokens_details") or {}, "cached_tokens")
        return _int(usage, "input_tokens"), _int(usage, "output_tokens"), cached, cost
    # Anthropic Messages: input_tokens leaves out the cached part.
    cached = _int(usage, "cache_read_input_tokens")
    prompt = _int(usage, "input_tokens") + cached + _int(usage, "cache_creation_input_tokens")
    return prompt, _int(usage, "output_tokens"), cached, cost


def _int(mapping: dict, key: str) -> int:
    value = mapping.get(key)
    return int(value) if isinstance(value, int | float) else 0
