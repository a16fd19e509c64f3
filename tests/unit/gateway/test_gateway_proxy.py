"""The gateway on 127.0.0.1 in front of a stand-in provider (an httpx mock
transport): the key swap per provider, tokens that die with their run, budgets,
usage, and answers streamed through as they come."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from pier.errors import SandboxError
from pier.gateway import Budget, Gateway

KEY = "sk-real-provider-key"


class Provider:
    """Records what reached it and answers with a scripted body."""

    def __init__(self) -> None:
        self.seen: list[httpx.Request] = []
        self.answer: httpx.Response | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if self.answer is not None:
            return self.answer
        usage = {"input_tokens": 100, "output_tokens": 20}
        return httpx.Response(200, json={"id": "m1", "usage": usage}, headers={"x-request-id": "r1"})


@pytest.fixture
def provider() -> Provider:
    return Provider()


@pytest.fixture
def gateway(provider: Provider) -> Iterator[Gateway]:
    made = Gateway("127.0.0.1", transport=httpx.MockTransport(provider)).start()
    yield made
    made.stop()


def open_grant(gateway: Gateway, provider: str = "anthropic", upstream: str = "https://api.anthropic.com",
               budget: Budget | None = None, ttl: float = 60):  # fmt: skip
    grant = gateway.open("run-1", provider, KEY, upstream, budget or Budget(), ttl)
    return grant, gateway.base_url(grant)


def test_anthropic_token_is_swapped_for_the_key_and_the_answer_passes_through(gateway, provider):
    grant, base = open_grant(gateway)
    assert base == f"{gateway.url}/anthropic" and KEY not in base
    answer = httpx.post(f"{base}/v1/messages", headers={"x-api-key": grant.token, "anthropic-version": "2023-06-01"},
                        json={"model": "claude-sonnet-4-5", "messages": []})  # fmt: skip
    assert answer.status_code == 200 and answer.json()["id"] == "m1"
    assert answer.headers["x-request-id"] == "r1"
    sent = provider.seen[0]
    assert str(sent.url) == "https://api.anthropic.com/v1/messages"
    assert sent.headers["x-api-key"] == KEY and "authorization" not in sent.headers
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert json.loads(sent.content)["model"] == "claude-sonnet-4-5"
    assert grant.usage() == {"requests": 1, "api_calls": 1, "prompt_tokens": 100, "completion_tokens": 20,
                             "total_tokens": 120, "cached_tokens": 0, "cost_usd": pytest.approx(0.0006),
                             "cost_source": "price table", "answers": {"200": 1},
                             "calls": [{"id": "m1", "model": "claude-sonnet-4-5", "prompt_tokens": 100,
                                        "completion_tokens": 20, "cached_tokens": 0,
                                        "cost_usd": pytest.approx(0.0006)}]}  # fmt: skip


def test_bearer_providers_and_paths_below_the_upstream_root(gateway, provider):
    grant, base = open_grant(gateway, "openrouter", "https://openrouter.ai/api/v1")
    assert base == f"{gateway.url}/openrouter/api/v1"
    httpx.post(f"{base}/chat/completions", headers={"authorization": f"Bearer {grant.token}"}, json={})
    sent = provider.seen[0]
    assert str(sent.url) == "https://openrouter.ai/api/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"


def test_google_key_header_and_key_parameter(gateway, provider):
    grant, base = open_grant(gateway, "google", "https://generativelanguage.googleapis.com")
    path = "/v1beta/models/gemini-2.5-pro:generateContent"
    httpx.post(f"{base}{path}", headers={"x-goog-api-key": grant.token}, json={})
    httpx.post(f"{base}{path}", params={"key": grant.token, "alt": "sse"}, json={})
    assert [r.headers["x-goog-api-key"] for r in provider.seen] == [KEY, KEY]
    assert provider.seen[1].url.params["key"] == KEY and provider.seen[1].url.params["alt"] == "sse"
    assert all(grant.token not in str(r.url) for r in provider.seen)


def test_a_token_is_worthless_outside_its_live_run(gateway, provider):
    grant, base = open_grant(gateway)
    assert httpx.post(f"{base}/v1/messages", headers={"x-api-key": "sk-guess"}).status_code == 401
    assert httpx.post(f"{base}/v1/messages", headers={"x-api-key": KEY}).status_code == 401  # the key itself
    other = httpx.post(
        f"{gateway.url}/openai/v1/responses", headers={"authorization": f"Bearer {grant.token}"}
    )
    assert other.status_code == 404
    gateway.close(grant)
    closed = httpx.post(f"{base}/v1/messages", headers={"x-api-key": grant.token})
    assert closed.status_code == 401 and "expired with its run" in closed.json()["error"]["message"]
    expired, expired_base = open_grant(gateway, ttl=-1)
    assert httpx.post(f"{expired_base}/v1/messages", headers={"x-api-key": expired.token}).status_code == 401
    assert provider.seen == []


def test_budget_refuses_the_request_past_it_with_a_readable_error(gateway, provider):
    grant, base = open_grant(gateway, budget=Budget(requests=5, tokens=200))
    statuses = [
        httpx.post(f"{base}/v1/messages", headers={"x-api-key": grant.token}, json={}) for _ in range(3)
    ]
    assert [s.status_code for s in statuses] == [200, 200, 402]
    error = statuses[2].json()
    assert error["type"] == "error" and error["error"]["type"] == "budget_exceeded"
    assert "240 tokens used, budget 200" in error["error"]["message"]
    assert grant.refused == "240 tokens used, budget 200" and len(provider.seen) == 2


def test_answers_stream_through_as_they_come(provider):
    """The first event reaches the client while the provider still holds the rest."""
    release = threading.Event()

    async def events():
        yield b'event: message_start\ndata: {"message": {"usage": {"input_tokens": 7}}}\n\n'
        released = await asyncio.to_thread(release.wait, 30)
        yield b'event: message_delta\ndata: {"usage": {"output_tokens": 3}}\n\n' if released else b""

    provider.answer = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events())
    gateway = Gateway("127.0.0.1", transport=httpx.MockTransport(provider)).start()
    try:
        grant, base = open_grant(gateway)
        with httpx.stream(
            "POST", f"{base}/v1/messages", headers={"x-api-key": grant.token}, json={}
        ) as answer:
            chunks = answer.iter_raw()
            assert b"message_start" in next(chunks)
            release.set()
            assert b"output_tokens" in b"".join(chunks)
        assert grant.usage()["prompt_tokens"] == 7 and grant.usage()["completion_tokens"] == 3
    finally:
        release.set()
        gateway.stop()


def test_the_gateway_never_listens_on_every_interface():
    for host in ("0.0.0.0", "::"):
        with pytest.raises(SandboxError, match="every interface"):
            Gateway(host)


def test_usage_is_kept_when_the_client_hangs_up_after_the_event_it_needed(provider):
    """codex closes a Responses stream as soon as it has response.completed."""
    release = threading.Event()

    async def events():
        yield b'event: response.completed\ndata: {"response": {"usage": {"input_tokens": 9, "output_tokens": 4}}}\n\n'
        await asyncio.to_thread(release.wait, 30)
        yield b"event: done\ndata: {}\n\n"

    provider.answer = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events())
    gateway = Gateway("127.0.0.1", transport=httpx.MockTransport(provider)).start()
    try:
        grant, base = open_grant(gateway, "openai", "https://api.openai.com/v1")
        headers = {"authorization": f"Bearer {grant.token}"}
        with httpx.stream("POST", f"{base}/responses", headers=headers, json={"model": "gpt-5"}) as answer:
            assert b"response.completed" in next(answer.iter_raw())
        deadline = time.monotonic() + 20
        while grant.usage()["api_calls"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)  # the gateway learns of the hang-up on its own loop
        assert grant.usage()["prompt_tokens"] == 9 and grant.usage()["completion_tokens"] == 4
    finally:
        release.set()
        gateway.stop()


def test_the_providers_refusals_are_counted_with_the_last_answers_message(gateway, provider):
    """Three 401s: the grant knows the provider refused 3 of 3 requests and what
    it said last; an answer that succeeds afterwards clears the trouble."""
    grant, base = open_grant(gateway)
    for n in range(3):
        provider.answer = httpx.Response(
            401,
            json={
                "type": "error",
                "error": {"type": "authentication_error", "message": f"invalid x-api-key {n}"},
            },
        )
        answer = httpx.post(f"{base}/v1/messages", headers={"x-api-key": grant.token}, json={"model": "m"})
        assert answer.status_code == 401 and "invalid x-api-key" in answer.text  # passed through unchanged
    trouble = grant.trouble()
    assert trouble is not None
    assert (trouble.status, trouble.count, trouble.requests, trouble.kind) == (401, 3, 3, "refused")
    assert trouble.message == "invalid x-api-key 2"
    assert grant.usage()["answers"] == {"401": 3} and grant.usage()["api_calls"] == 0

    provider.answer = httpx.Response(429, text="slow down")
    httpx.post(f"{base}/v1/messages", headers={"x-api-key": grant.token}, json={"model": "m"})
    trouble = grant.trouble()
    assert trouble is not None and (trouble.kind, trouble.count, trouble.requests) == ("rate_limited", 1, 4)
    assert trouble.message == "slow down"

    provider.answer = None
    httpx.post(f"{base}/v1/messages", headers={"x-api-key": grant.token}, json={"model": "claude-sonnet-4-5"})
    assert grant.trouble() is None  # its last answer was fine: the agent was not stopped by it


def test_a_provider_that_reports_its_own_cost_is_believed_over_the_price_table(gateway, provider):
    """OpenRouter's `usage.cost`: the run's cost is what the provider billed, and says so."""
    grant, base = open_grant(gateway, "openrouter", "https://openrouter.ai/api/v1")
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "cost": 0.0246}
    provider.answer = httpx.Response(200, json={"id": "gen-1", "usage": usage})
    httpx.post(f"{base}/chat/completions", headers={"authorization": f"Bearer {grant.token}"},
               json={"model": "anthropic/claude-sonnet-4.5"})  # fmt: skip
    seen = grant.usage()
    assert seen["cost_usd"] == 0.0246 and seen["cost_source"] == "provider"
    assert seen["calls"][0]["id"] == "gen-1" and seen["calls"][0]["cost_usd"] == 0.0246
