"""Where a run's model calls go: to the upstream the operator named for the
provider, never to one a run names. A collection token holder controls a
run's `secret_params`, its collection's environment and its runbook, so an
endpoint variable found there (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, ...) is
refused, unless the operator let that collection bring its own endpoint
(PIER_COLLECTION_UPSTREAMS, by name or address). Then the key sent there must
be the collection's own: an operator's key (a trial key) only ever goes to the
operator's upstream for its provider.

The operator's upstream for a provider is PIER_UPSTREAMS' entry for it, else
the endpoint variable of the environment pier itself runs in (what `pier run`
has always read from its shell), else the provider's public API."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from pier.errors import InputError
from pier.outbound import Allowed, OutboundPolicy, names, parse_address, parse_allowed
from pier.settings import Settings
from pier.settings.network import COLLECTION_UPSTREAMS_SETTING, UPSTREAMS_SETTING

# How the upstream was chosen: the provider's public API, the operator's
# setting or environment, or the collection's own endpoint the operator allowed.
DEFAULT, OPERATOR, COLLECTION = "default", "operator", "collection"
# AWS region names (us-east-1, ap-southeast-2, us-gov-west-1): a region is
# spliced into Bedrock's host name, so nothing else may pass.
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


@dataclass(frozen=True)
class Upstream:
    url: str  # "" when the provider's endpoint is regional and the CLI finds it (Bedrock)
    source: str = DEFAULT
    # What the gateway may connect to for it beyond the outbound policy: the
    # host the operator named (the operator's upstream, an address allowed for
    # the collection). A name allowed for a collection is not here: the
    # collection may control what it resolves to, so its addresses are judged.
    allowed: tuple[Allowed, ...] = ()


@dataclass(frozen=True)
class Upstreams:
    """The operator's choice of model endpoints for one collection's runs."""

    collection: str = ""
    operator: Mapping[str, str] = field(default_factory=dict)  # provider -> base URL
    own: tuple[Allowed, ...] = ()  # endpoints the collection may name itself
    # The outbound policy (PIER_OUTBOUND_ALLOW): a collection's endpoint is judged
    # by it at accept as at connect; None: not judged at accept.
    policy: OutboundPolicy | None = field(default=None, compare=False)

    @classmethod
    def of(cls, settings: Settings, collection: str, environ: Mapping[str, str] | None = None) -> Upstreams:
        from pier.agents.providers import PROVIDERS

        unknown = sorted(set(settings.upstreams) - set(PROVIDERS))
        if unknown:
            raise InputError(
                f"{UPSTREAMS_SETTING} names {', '.join(unknown)}, which is not a model provider pier "
                f"routes: use {', '.join(PROVIDERS)}"
            )
        environ = os.environ if environ is None else environ
        operator = {
            name: (settings.upstreams.get(name) or environ.get(p.base_url_env, "")).strip().rstrip("/")
            for name, p in PROVIDERS.items()
        }
        entries = settings.collection_upstreams.get(collection, [])
        own = parse_allowed(",".join(entries), COLLECTION_UPSTREAMS_SETTING)
        return cls(collection, {k: v for k, v in operator.items() if v}, own, settings.outbound)

    def choose(self, provider: str, variable: str, default: str, asked: str | None) -> Upstream:
        """The upstream for provider, given what the run's environment put in its
        endpoint variable (asked). InputError naming the setting when the run
        names an endpoint the operator did not allow for this collection."""
        mine = self.operator.get(provider)
        url = mine or default
        source = OPERATOR if mine else DEFAULT
        chosen = Upstream(url, source, _exact(url) if mine else ())
        asked = (asked or "").strip().rstrip("/")
        if not asked or asked == url:
            return chosen
        parts = _url(variable, asked)
        host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
        matched = names(self.own, host, port)
        if not matched:
            where = f"collection '{self.collection}'" if self.collection else "this run"
            example = f'{{"{self.collection or "<collection>"}": ["{_hostport(host, port)}"]}}'
            raise InputError(
                f"{variable}: {asked} is not an upstream pier sends {where}'s model calls to: pier "
                f"sends them only to the operator's upstream for {provider} ({url or 'its regional API'}). "
                f"Remove {variable} from the collection's environment and the run's secret_params, or ask "
                f"the operator to allow this endpoint for the collection ({COLLECTION_UPSTREAMS_SETTING}="
                f"'{example}') or to make it every run's upstream ({UPSTREAMS_SETTING})"
            )
        allowed = tuple(e for e in matched if e.name is None)
        if self.policy is not None:  # what it resolves to now (a name allowed gives no address)
            replace(self.policy, allowed=(*self.policy.allowed, *allowed)).check_name(host, port, variable)
        return Upstream(asked, COLLECTION, allowed)


def check_region(region: str) -> str:
    """An AWS region, which is spliced into Bedrock's endpoint host name."""
    if not _REGION.fullmatch(region):
        raise InputError(f"AWS_REGION: {region!r} is not an AWS region name (us-east-1, eu-west-1, ...)")
    return region


def _url(variable: str, text: str):
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise InputError(f"{variable}: {text!r} is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{variable}: {text!r} is not an http:// or https:// URL with a host")
    return parts


def _exact(url: str) -> tuple[Allowed, ...]:
    """The operator's upstream as an allowance: its host (name or address) and port."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parse_allowed(_hostport(str(parse_address(host) or host), port))


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
