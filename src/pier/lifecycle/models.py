"""A workflow step's model call (litellm_chat, simple_judge): pier itself asks
the provider, through its model gateway as an agent does, so the step's
tokens, cost and budget are counted the same way and the provider's key is
held by the gateway, not by the client (docs/workflows.md). The provider's
protocol is spoken by its own SDK (`openai` for OpenAI-compatible providers,
`anthropic` for Anthropic's Messages API)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from pier.agents.providers import ProviderChoice, choose_provider
from pier.agents.upstreams import Upstreams
from pier.errors import InputError, PierError
from pier.gateway.grants import Budget
from pier.outbound import OutboundPolicy

SUPPORTED = ("openai", "openrouter", "anthropic")
GRANT_TTL_S = 1800.0
CALL_TIMEOUT_S = 600.0


class ModelCallError(PierError):
    """The provider refused or failed the step's call."""


@dataclass(frozen=True)
class ChatAnswer:
    text: str
    model: str
    provider: str
    usage: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None


def own_provider(model: str) -> str:
    """The provider a model name points at when the step names none."""
    vendor, slash, bare = model.partition("/")
    name = (bare if slash else model).lower()
    if slash and vendor not in ("openai", "anthropic"):
        return "openrouter"
    if name.startswith("claude"):
        return "anthropic"
    return "openai"


def choose(
    model: str,
    requested: str | None,
    env: Mapping[str, str],
    upstreams: Upstreams | None = None,
    operator_keys: frozenset[str] = frozenset(),
) -> ProviderChoice:
    """The provider, its key and its endpoint for a step's model, as an agent's
    are chosen (the operator's upstream; a collection's own endpoint only where
    the operator allowed it): InputError naming the variable or setting."""
    try:
        return choose_provider(
            "litellm", SUPPORTED, own_provider(model), requested, model, env, upstreams, operator_keys
        )
    except InputError as exc:  # its words are an agent's: say them of a model step
        raise InputError(str(exc).replace("agent litellm", f"model {model}", 1)) from None


def chat(
    *,
    trajectory_id: str,
    model: str,
    provider: str | None,
    messages: list[dict[str, Any]],
    env: Mapping[str, str],
    gateway: Any | None,
    budget: Budget | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    response_format: dict[str, Any] | None = None,
    policy: OutboundPolicy | None = None,
    upstreams: Upstreams | None = None,
    operator_keys: frozenset[str] = frozenset(),
) -> ChatAnswer:
    """One chat completion. With a gateway (pier.gateway.server.Gateway) the
    call goes through a grant of its own, whose count is the answer's usage.
    The provider's endpoint must pass the outbound policy (a collection's
    OPENAI_BASE_URL may not point pier at this machine's own services)."""
    choice = choose(model, provider, env, upstreams, operator_keys)
    if policy is not None:  # the gateway judges it again when it connects
        upstream = httpx.URL(choice.base_url)
        port = upstream.port or (443 if upstream.scheme == "https" else 80)
        allowed = replace(policy, allowed=(*policy.allowed, *choice.upstream_allowed))
        try:
            allowed.resolve(upstream.host, port, f"{choice.provider.base_url_env}")
        except OSError as exc:
            raise ModelCallError(
                f"{choice.name} endpoint {choice.base_url} does not resolve: {exc}"
            ) from None
    grant = None
    base_url, key = choice.base_url, choice.key
    if gateway is not None:
        grant = gateway.open(
            trajectory_id, choice.name, choice.key, choice.base_url, budget or Budget(), GRANT_TTL_S,
            allowed=choice.upstream_allowed,
        )  # fmt: skip
        base_url, key = gateway.base_url(grant), grant.token
    try:
        if choice.name == "anthropic":
            text, finish, reported = _anthropic(
                base_url, key, choice.model or model, messages, temperature, max_tokens
            )
        else:
            text, finish, reported = _openai(
                base_url, key, choice.model or model, messages, temperature, max_tokens, response_format
            )
    except InputError:
        raise
    except Exception as exc:  # the SDKs' errors: status, refusal, connection
        refused = grant.refused if grant is not None else None
        if refused:
            raise ModelCallError(
                f"the model budget was used up ({refused}): raise init_params.model_budget"
            ) from None
        raise ModelCallError(f"{choice.name} {model}: {type(exc).__name__}: {exc}") from None
    finally:
        if grant is not None:
            assert gateway is not None  # the grant is the gateway's
            gateway.close(grant)
    usage = grant.usage() if grant is not None else reported
    return ChatAnswer(text, choice.model or model, choice.name, usage, finish)


def _openai(
    base_url: str,
    key: str,
    model: str,
    messages: list[dict[str, Any]],
    temperature: float | None,
    max_tokens: int | None,
    response_format: dict[str, Any] | None,
) -> tuple[str, str | None, dict[str, Any]]:
    from openai import OpenAI

    extra: dict[str, Any] = {}
    if temperature is not None:
        extra["temperature"] = temperature
    if max_tokens is not None:
        extra["max_tokens"] = max_tokens
    if response_format is not None:
        extra["response_format"] = response_format
    with OpenAI(base_url=base_url, api_key=key, timeout=CALL_TIMEOUT_S, max_retries=1) as client:
        answer = client.chat.completions.create(model=model, messages=messages, **extra)  # type: ignore[arg-type]
    choice = answer.choices[0] if answer.choices else None
    text = (choice.message.content or "") if choice else ""
    usage = answer.usage
    reported = (
        {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
         "total_tokens": usage.total_tokens}
        if usage else {}
    )  # fmt: skip
    return text, choice.finish_reason if choice else None, reported


def _anthropic(
    base_url: str,
    key: str,
    model: str,
    messages: list[dict[str, Any]],
    temperature: float | None,
    max_tokens: int | None,
) -> tuple[str, str | None, dict[str, Any]]:
    from anthropic import Anthropic

    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    turns = [m for m in messages if m["role"] != "system"]
    extra: dict[str, Any] = {"system": system} if system else {}
    if temperature is not None:
        # Anthropic's range is 0..1; this SDK no longer names it (newer models refuse it)
        extra["extra_body"] = {"temperature": min(temperature, 1.0)}
    with Anthropic(base_url=base_url, api_key=key, timeout=CALL_TIMEOUT_S, max_retries=1) as client:
        answer = client.messages.create(model=model, messages=turns, max_tokens=max_tokens or 4096, **extra)  # type: ignore[arg-type]
    text = "".join(getattr(block, "text", "") for block in answer.content)
    reported = {
        "prompt_tokens": answer.usage.input_tokens,
        "completion_tokens": answer.usage.output_tokens,
        "total_tokens": answer.usage.input_tokens + answer.usage.output_tokens,
    }
    return text, answer.stop_reason, reported


def as_text(value: Any) -> str:
    """A prompt as the model gets it: text as is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
