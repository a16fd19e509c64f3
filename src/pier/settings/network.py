"""Where runs' traffic goes: the model gateway, the egress allow-list, and the
outbound policy for every connection pier makes on a run's behalf."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator

from pier.outbound import OutboundPolicy, parse_allowed

UPSTREAMS_SETTING = "PIER_UPSTREAMS"
COLLECTION_UPSTREAMS_SETTING = "PIER_COLLECTION_UPSTREAMS"


class NetworkSettings(BaseModel):
    """The model gateway (agents reach their provider through pier, holding a
    per-run token), the egress allow-list, and the outbound policy."""

    gateway: bool = Field(
        True, description="route agents' model calls through pier's gateway (keys stay out)"
    )
    gateway_host: str | None = Field(
        None, description="address the gateway listens on; default the Docker bridge's gateway address"
    )
    gateway_port: int = Field(0, ge=0, le=65535, description="0: a free port")
    gateway_max_requests: int | None = Field(None, ge=1, description="default per-run model request budget")
    gateway_max_tokens: int | None = Field(None, ge=1, description="default per-run token budget")
    gateway_max_cost_usd: float | None = Field(None, gt=0, description="default per-run cost budget (USD)")
    # Where model calls go (pier.agents.upstreams): the operator's, never a run's.
    upstreams: dict[str, str] = Field(
        default_factory=dict,
        description='the model upstream per provider, JSON: {"anthropic": "https://llm-proxy.corp", "openai": '
        '"http://vllm.lan:8000/v1"}; a provider not named uses the endpoint variable of the environment pier '
        "itself runs in (ANTHROPIC_BASE_URL...), else its public API. A run's own endpoint variables are refused",
    )
    collection_upstreams: dict[str, list[str]] = Field(
        default_factory=dict,
        description='endpoints a collection may name itself in its ANTHROPIC_BASE_URL & co., JSON: {"acme": '
        '["llm.acme.example", "10.1.2.3:8000"]} (host names, addresses or CIDRs, each optionally :port); '
        "an address named here may be private",
    )
    # The outbound policy (pier.outbound): the one place an operator lets pier
    # connect, for a run, to a loopback, link-local, private or own address.
    outbound_allow: str = Field(
        "",
        description="destinations runs may reach that are otherwise refused (loopback, private, this "
        "machine): host names, addresses, CIDRs, each optionally :port, comma-separated",
    )
    network_allow: str = Field(
        "", description="egress allow-list every run gets (comma-separated); runs add their network.allow"
    )
    egress_network: str = Field(
        "pier-egress", description="internal Docker network of allow-listed sandboxes"
    )

    @field_validator("outbound_allow")
    @classmethod
    def _outbound_allow(cls, value: str) -> str:
        parse_allowed(value)  # a bad entry stops pier at start, not at a run's first connection
        return value

    @field_validator("upstreams")
    @classmethod
    def _upstreams(cls, value: dict[str, str]) -> dict[str, str]:
        for provider, url in value.items():
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f"{UPSTREAMS_SETTING}: {provider}'s upstream {url!r} is not an http:// or https:// URL with a host"
                )
        return {provider: url.rstrip("/") for provider, url in value.items()}

    @field_validator("collection_upstreams")
    @classmethod
    def _collection_upstreams(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for collection, entries in value.items():
            try:
                parse_allowed(",".join(entries), COLLECTION_UPSTREAMS_SETTING)
            except ValueError as exc:
                raise ValueError(f"{exc} (collection {collection!r})") from None
        return value

    @property
    def outbound(self) -> OutboundPolicy:
        return OutboundPolicy.from_setting(self.outbound_allow)
