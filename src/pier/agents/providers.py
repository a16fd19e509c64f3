"""Model providers: which key variable each needs, its endpoint, the
default choice when a runbook names none, and the model name each expects.

Endpoints are written in each provider's usual convention (Anthropic's without
/v1, OpenAI-compatible ones with it); an adapter converts where its CLI differs.
Which endpoint a run uses is the operator's choice (pier.agents.upstreams): an
endpoint variable in a run's environment is refused unless the operator allowed
the collection its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pier.agents.upstreams import COLLECTION, DEFAULT, Upstreams, check_region
from pier.errors import InputError
from pier.outbound import Allowed

BEDROCK_DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class Provider:
    name: str
    key_env: str  # the variable that holds the key
    base_url: str  # the default endpoint
    base_url_env: str  # the variable that overrides it


PROVIDERS: dict[str, Provider] = {
    "anthropic": Provider("anthropic", "ANTHROPIC_API_KEY", "https://api.anthropic.com", "ANTHROPIC_BASE_URL"),
    "openrouter": Provider("openrouter", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1", "OPENROUTER_BASE_URL"),
    "openai": Provider("openai", "OPENAI_API_KEY", "https://api.openai.com/v1", "OPENAI_BASE_URL"),
    "google": Provider("google", "GEMINI_API_KEY", "https://generativelanguage.googleapis.com", "GOOGLE_GEMINI_BASE_URL"),
    "bedrock": Provider("bedrock", "AWS_BEARER_TOKEN_BEDROCK", "", "ANTHROPIC_BEDROCK_BASE_URL"),
    # no agent's: a workflow's image and video steps (pier.lifecycle.media)
    "replicate": Provider("replicate", "REPLICATE_API_TOKEN", "https://api.replicate.com", "REPLICATE_BASE_URL"),
}  # fmt: skip
# The providers agents run on: every one but those only a workflow's media steps call.
AGENT_PROVIDERS: tuple[str, ...] = tuple(name for name in PROVIDERS if name != "replicate")
# When a runbook names no provider: the first of these the agent supports whose
# key is set in the run's environment (one key for every vendor's models comes
# first), else the agent's own provider (_default).
DEFAULT_ORDER = ("openrouter", "bedrock")
EXTRA_ENV = {"bedrock": ("AWS_REGION",)}


@dataclass(frozen=True)
class ProviderChoice:
    provider: Provider
    key: str
    base_url: str
    model: str | None  # the model name as this provider expects it
    env: Mapping[str, str] = field(default_factory=dict)  # the provider's other settings
    upstream: str = DEFAULT  # who chose base_url (pier.agents.upstreams)
    # Destinations the operator named for base_url, beyond the outbound policy.
    upstream_allowed: tuple[Allowed, ...] = ()

    @property
    def name(self) -> str:
        return self.provider.name


def choose_provider(
    agent: str,
    supported: tuple[str, ...],
    own: str,
    requested: str | None,
    model: str | None,
    env: Mapping[str, str],
    upstreams: Upstreams | None = None,
    operator_keys: frozenset[str] = frozenset(),
) -> ProviderChoice:
    """The provider for a run, and its endpoint as the operator decides it
    (upstreams; none given: the public APIs, and no endpoint of the run's own).
    Raises InputError naming the variable to set when its key is missing, the
    providers the agent supports when it cannot use one, or the setting that
    would allow the endpoint the run names."""
    name = requested or _default(supported, own, env)
    if name not in supported:
        raise InputError(
            f"agent {agent} cannot use model_provider '{name}'; it supports {', '.join(supported)}"
        )
    provider = PROVIDERS[name]
    key = env.get(provider.key_env, "")
    if not key:
        how = f"model_provider {name}" if requested else f"the default provider ({name})"
        raise InputError(
            f"agent {agent} with {how} needs the API key in {provider.key_env}: set {provider.key_env} "
            "in the environment pier runs in (or the collection's environment)"
        )
    extra = {k: env[k] for k in EXTRA_ENV.get(name, ()) if env.get(k)}
    if name == "bedrock":
        extra["AWS_REGION"] = check_region(extra.get("AWS_REGION") or BEDROCK_DEFAULT_REGION)
    chosen = (upstreams or Upstreams()).choose(
        name, provider.base_url_env, provider.base_url, env.get(provider.base_url_env)
    )
    if chosen.source == COLLECTION and provider.key_env in operator_keys:
        raise InputError(
            f"{provider.base_url_env}: this server's trial key for {name} goes only to the operator's "
            f"upstream, never to the collection's own endpoint ({chosen.url}): set your own "
            f"{provider.key_env} in the collection's environment, or remove {provider.base_url_env}"
        )
    return ProviderChoice(
        provider, key, chosen.url, model_for(name, model), extra, chosen.source, chosen.allowed
    )


def _default(supported: tuple[str, ...], own: str, env: Mapping[str, str]) -> str:
    for name in DEFAULT_ORDER:
        if name in supported and env.get(PROVIDERS[name].key_env):
            return name
    return own


def model_for(provider: str, model: str | None) -> str | None:
    """OpenRouter names models vendor/model; the vendors' own APIs take bare names."""
    if not model:
        return None
    vendor, slash, bare = model.partition("/")
    if provider == "openrouter":
        return model if slash else f"{_vendor_of(model)}/{model}" if _vendor_of(model) else model
    if slash and vendor in ("anthropic", "openai", "google"):
        return bare
    return model


# Which vendors' models a provider's own API serves; OpenRouter serves every vendor's.
SERVES = {
    "anthropic": ("anthropic",),
    "bedrock": ("anthropic",),
    "openai": ("openai",),
    "google": ("google",),
}


def serves(provider: str, model: str) -> bool:
    """Whether `provider` can serve `model`, as far as the name tells: a model of a
    known vendor (claude-*, gpt-*, gemini-*, vendor/...) only from that vendor's
    API (or OpenRouter); a name pier does not recognise is left to the provider."""
    vendors = SERVES.get(provider)
    if vendors is None:
        return provider in PROVIDERS
    vendor, slash, _ = model.partition("/")
    vendor = vendor.lower() if slash else _vendor_of(model)
    return not vendor or vendor in vendors


def _vendor_of(model: str) -> str:
    name = model.lower()
    if name.startswith("claude-"):
        return "anthropic"
    if name.startswith(("gpt-", "o1", "o3", "o4", "codex-")):
        return "openai"
    if name.startswith("gemini-"):
        return "google"
    return ""


def env_names(supported: tuple[str, ...]) -> tuple[str, ...]:
    """Every host variable a provider of these may read (keys, endpoints, region)."""
    names: list[str] = []
    for name in supported:
        provider = PROVIDERS[name]
        names += [provider.key_env, provider.base_url_env, *EXTRA_ENV.get(name, ())]
    return tuple(dict.fromkeys(names))


def setting_names() -> frozenset[str]:
    """The provider variables that are settings, not secrets (endpoints, the
    region): a check that fills a run's keys with placeholders leaves these
    out, since a placeholder is no URL or region."""
    return frozenset(
        {p.base_url_env for p in PROVIDERS.values()} | {n for names in EXTRA_ENV.values() for n in names}
    )


def without_v1(url: str) -> str:
    """An OpenAI-style endpoint as an Anthropic-style root (OpenRouter serves both)."""
    return url[: -len("/v1")] if url.endswith("/v1") else url
