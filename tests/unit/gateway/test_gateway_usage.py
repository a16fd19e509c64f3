"""Usage read from each wire format's JSON answers and SSE streams, and priced."""

from __future__ import annotations

import json

import pytest

from pier.gateway.usage import call_usage, is_generation, model_of, price

SSE = "text/event-stream"


def sse(*events: tuple[str | None, object]) -> bytes:
    out = ""
    for name, data in events:
        out += (
            f"event: {name}\n" if name else ""
        ) + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
    return out.encode()


def test_anthropic_json_counts_cached_input_as_prompt():
    body = {"usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5,
                      "output_tokens": 7}}  # fmt: skip
    used = call_usage("application/json", json.dumps(body).encode(), "anthropic", "claude-sonnet-4-5")
    assert (used.prompt_tokens, used.completion_tokens, used.cache_read_tokens) == (105, 7, 90)
    assert used.cost_usd is not None and used.cost_usd > 0


def test_anthropic_stream_takes_input_from_start_and_output_from_delta():
    body = sse(
        (
            "message_start",
            {"type": "message_start", "message": {"usage": {"input_tokens": 100, "output_tokens": 1}}},
        ),
        ("content_block_delta", {"type": "content_block_delta", "delta": {"text": "hi"}}),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 20}}),
        ("message_stop", {"type": "message_stop"}),
    )
    used = call_usage(SSE + "; charset=utf-8", body, "anthropic", "claude-sonnet-4-5")
    assert (used.prompt_tokens, used.completion_tokens) == (100, 20)


def test_chat_stream_usage_chunk_and_openrouter_reported_cost():
    body = sse(
        (None, {"choices": [{"delta": {"content": "x"}}]}),
        (None, {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20, "cost": 0.0123}}),
        (None, "[DONE]"),
    )
    used = call_usage(SSE, body, "openrouter", "anthropic/claude-sonnet-4.5")
    assert (used.prompt_tokens, used.completion_tokens, used.cost_usd) == (100, 20, 0.0123)


def test_responses_stream_reads_the_completed_event():
    created = {"type": "response.created", "response": {"usage": None}}
    done = {"type": "response.completed", "response": {"usage": {
        "input_tokens": 100, "input_tokens_details": {"cached_tokens": 40}, "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 5}}}}  # fmt: skip
    used = call_usage(
        SSE, sse(("response.created", created), ("response.completed", done)), "openai", "gpt-5.1-codex"
    )
    assert (used.prompt_tokens, used.completion_tokens, used.cache_read_tokens) == (100, 20, 40)
    assert used.cost_usd is not None and used.cost_usd > 0


def test_gemini_array_and_sse_forms_take_the_running_total():
    chunks = [{"usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 3}},
              {"usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 15, "thoughtsTokenCount": 5}}]  # fmt: skip
    as_array = call_usage("application/json", json.dumps(chunks).encode(), "google", "gemini-2.5-pro")
    as_sse = call_usage(SSE, sse(*[(None, c) for c in chunks]), "google", "gemini-2.5-pro")
    assert (as_array.prompt_tokens, as_array.completion_tokens) == (100, 20)
    assert as_sse == as_array


def test_no_usage_and_unknown_models():
    assert call_usage("application/json", b'{"data": []}', "openai", "gpt-5") is None
    assert call_usage("application/json", b"not json", "openai", "gpt-5") is None
    assert price("openai", "no-such-model-pier", 10, 10, 0) is None
    assert price("openai", None, 10, 10, 0) is None


@pytest.mark.parametrize(
    ("path", "counted"),
    [("/v1/messages", True), ("/v1/messages/count_tokens", False), ("/api/v1/chat/completions", True),
     ("/v1/responses", True), ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", True),
     ("/v1beta/models/gemini-2.5-pro:countTokens", False), ("/v1/models", False)],
)  # fmt: skip
def test_only_generation_answers_are_read_for_usage(path, counted):
    assert is_generation(path) is counted


def test_model_comes_from_the_body_or_gemini_path():
    assert model_of("/v1/messages", {"model": "claude-x"}) == "claude-x"
    assert model_of("/v1beta/models/gemini-2.5-pro:generateContent", {}) == "gemini-2.5-pro"
    assert model_of("/v1/chat/completions", None) is None
