"""What the run's record says about its model use: the usage (the gateway's
measured figures, the CLI's own beside them) and, when the provider refused,
rate-limited or failed the agent's requests, an error that says so first."""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from pier.agents.providers import PROVIDERS
from pier.lifecycle.outcomes import Outcome

if TYPE_CHECKING:
    from pier.gateway.grants import ProviderTrouble

# The CLI's own figures, kept beside the gateway's under this key (never summed).
AGENT_REPORTED = "agent_reported"
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens", "cost_usd", "api_calls")


def run_usage(reported: dict[str, Any], seen: dict[str, Any] | None) -> dict[str, Any]:
    """The run's usage. With the gateway (`seen`): its figures, measured on every
    request the agent made (title and summary requests too), with the cost the
    provider reported or else the price table's (`cost_source` says which); the
    CLI's own figures beside them under AGENT_REPORTED; the gateway's whole count
    under `gateway` too. Without it (PIER_GATEWAY=false), the CLI's own figures."""
    if seen is None:
        return {**reported, "source": "agent"} if reported else {}
    usage: dict[str, Any] = {key: seen[key] for key in USAGE_FIELDS if key in seen}
    for key in ("requests", "cached_tokens", "cost_source", "unpriced_calls"):
        if key in seen:
            usage[key] = seen[key]
    usage["source"] = "gateway"
    if reported:
        usage[AGENT_REPORTED] = dict(reported)
    usage["gateway"] = seen
    return usage


_KIND_OUTCOME = {
    "refused": Outcome.provider_refused,
    "rate_limited": Outcome.rate_limited,
    "failed": Outcome.provider_error,
}


def trouble_outcome(trouble: ProviderTrouble | None) -> Outcome | None:
    """The run's outcome when the provider's answers explain its failure."""
    return None if trouble is None else _KIND_OUTCOME.get(trouble.kind)


def provider_message(trouble: ProviderTrouble, then: str) -> str:
    """'the provider answered 401 Unauthorized to 3 of 3 requests: check
    ANTHROPIC_API_KEY (its last answer: ...); then <what the agent did>'."""
    try:
        phrase = HTTPStatus(trouble.status).phrase
    except ValueError:
        phrase = "error"
    provider = PROVIDERS.get(trouble.provider)
    key = provider.key_env if provider else "the provider's API key"
    advice = {
        "refused": f"check {key}: the provider does not accept it (or it may not use this model)",
        "rate_limited": "the key's rate limit or quota is reached: wait and run again, or raise the limit "
        "with the provider",
        "failed": "the provider failed (or could not be reached): try again later",
    }.get(trouble.kind, "see the agent log")
    said = f" (its last answer: {trouble.message})" if trouble.message else ""
    count = f"{trouble.count} of {trouble.requests} request{'s' if trouble.requests != 1 else ''}"
    return (f"the provider ({trouble.provider}) answered {trouble.status} {phrase} to {count}: "
            f"{advice}{said}; then {then}")  # fmt: skip
