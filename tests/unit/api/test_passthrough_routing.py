"""Which provider a passthrough chat completion goes to, by the model's name:
the vendor's own API when it speaks Chat Completions, else OpenRouter, which
serves every vendor's models; never a provider that speaks another protocol."""

from __future__ import annotations

import pytest

from pier.server.services.passthrough import candidates


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o-mini", [("openai", "gpt-4o-mini"), ("openrouter", "openai/gpt-4o-mini")]),
        ("openai/gpt-4o", [("openai", "gpt-4o"), ("openrouter", "openai/gpt-4o")]),
        ("claude-sonnet-4-5", [("openrouter", "anthropic/claude-sonnet-4-5")]),
        ("anthropic/claude-sonnet-4.5", [("openrouter", "anthropic/claude-sonnet-4.5")]),
        ("google/gemini-2.5-pro", [("openrouter", "google/gemini-2.5-pro")]),
        ("meta-llama/llama-3.3-70b", [("openrouter", "meta-llama/llama-3.3-70b")]),
        ("openrouter/openai/gpt-4o", [("openrouter", "openai/gpt-4o")]),
        ("my-local-model", [("openai", "my-local-model"), ("openrouter", "my-local-model")]),
    ],
)
def test_models_route_to_chat_completions_providers(model: str, expected: list[tuple[str, str]]) -> None:
    assert candidates(model) == expected


def test_a_requested_provider_narrows_the_choice() -> None:
    assert candidates("gpt-4o", "openrouter") == [("openrouter", "openai/gpt-4o")]
    assert candidates("claude-sonnet-4-5", "openai") == []
