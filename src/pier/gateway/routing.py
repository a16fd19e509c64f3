"""A run's side of the gateway: turning the provider choice an agent made into one
that points at the gateway with a per-run token, and the sandbox environment
without any provider key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pier.agents.providers import BEDROCK_DEFAULT_REGION, PROVIDERS, ProviderChoice
from pier.agents.upstreams import check_region
from pier.gateway.grants import Budget, Grant

if TYPE_CHECKING:  # the server (and its HTTP stack) loads when a run needs a model
    from pier.gateway.server import Gateway


@dataclass
class ModelRoute:
    """Routes one run's provider choice through a gateway (callable by an agent's
    launch). Holds the grant it opened so the run can read usage and close it."""

    gateway: Gateway
    trajectory_id: str
    budget: Budget
    ttl_s: float
    grant: Grant | None = None

    def __call__(self, choice: ProviderChoice) -> ProviderChoice:
        upstream = choice.base_url or upstream_default(choice)
        if self.grant is not None:
            self.gateway.close(self.grant)
        self.grant = self.gateway.open(
            self.trajectory_id, choice.name, choice.key, upstream, self.budget, self.ttl_s,
            allowed=choice.upstream_allowed,
        )  # fmt: skip
        return replace(choice, key=self.grant.token, base_url=self.gateway.base_url(self.grant))

    def close(self) -> None:
        if self.grant is not None:
            self.gateway.close(self.grant)


def upstream_default(choice: ProviderChoice) -> str:
    """The provider's endpoint when the choice names none (Bedrock's is regional)."""
    if choice.name == "bedrock":
        region = check_region(choice.env.get("AWS_REGION") or BEDROCK_DEFAULT_REGION)
        return f"https://bedrock-runtime.{region}.amazonaws.com"
    return PROVIDERS[choice.name].base_url


def without_provider_keys(env: Mapping[str, str], grant: Grant | None) -> dict[str, str]:
    """The run's environment for the sandbox: with a grant, no provider key or
    endpoint variable (the real upstream, which may carry credentials: the
    gateway holds it, the agent's launch points the CLI at the gateway) and no
    variable holding the routed key enter it."""
    if grant is None:
        return dict(env)
    held = {name for provider in PROVIDERS.values() for name in (provider.key_env, provider.base_url_env)}
    return {name: value for name, value in env.items() if name not in held and value != grant.key}
