"""A collection's model usage outside runs: each call's counts add up in one
row per provider, model and key source, on both store backends."""

from __future__ import annotations

import pytest

from pier.db import Store


def test_calls_add_up_per_model_and_key_source(store: Store) -> None:
    store.add_model_usage("c", "openai", "gpt-4o", "collection", requests=1, prompt_tokens=100,
                          completion_tokens=20, cost_usd=0.25)  # fmt: skip
    store.add_model_usage("c", "openai", "gpt-4o", "collection", requests=1, errors=1, cost_usd=0.5)
    store.add_model_usage("c", "openai", "gpt-4o", "trial", requests=1, prompt_tokens=7)
    store.add_model_usage("d", "openai", "gpt-4o", "collection", requests=5)
    rows = {(r["via"]): r for r in store.model_usage("c")}
    assert set(rows) == {"collection", "trial"}
    own = rows["collection"]
    assert (own["requests"], own["errors"], own["prompt_tokens"], own["completion_tokens"]) == (2, 1, 100, 20)
    assert own["cost_usd"] == pytest.approx(0.75)
    assert own["last_at"] >= own["first_at"]
    assert rows["trial"]["prompt_tokens"] == 7
    assert [r["requests"] for r in store.model_usage("d")] == [5]
    assert store.model_usage("none") == []


def test_an_unknown_count_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="tokens"):
        store.add_model_usage("c", "openai", "gpt-4o", "collection", tokens=1)
