"""The chat-completions endpoint's passthrough mode: a request without a
runbook `jetty` block is an OpenAI Chat Completions call that pier makes for
the collection, through its own model gateway (pier.gateway) on loopback, as
a workflow's model step does. So the key is the collection's (its
environment's OPENAI_API_KEY, OPENROUTER_API_KEY) or, when the request asks
(`jetty.use_trial_keys`) and the operator has them, the server's trial key;
the endpoint is the operator's upstream for the provider (pier.agents.upstreams:
PIER_UPSTREAMS, or the provider's public API; the collection's own only where
PIER_COLLECTION_UPSTREAMS allows it); the outbound policy judges every
connection; the gateway counts the answer's tokens and cost, which are added
to the collection's model usage (`GET /api/v1/collections/<c>/usage`).

Nothing in the request chooses where the call goes or with which key: a
header the client sends is not forwarded (the gateway gets the body and its
own token), and a body naming an endpoint or a key is refused.

Only providers whose API speaks Chat Completions are reached (openai,
openrouter): pier translates no protocol, so a Claude or Gemini model goes
through OpenRouter, or is refused naming the models the collection reaches."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pier.agents.providers import PROVIDERS, model_for, serves
from pier.agents.upstreams import COLLECTION, Upstreams
from pier.errors import InputError
from pier.gateway.grants import Budget
from pier.server.auth import Caller
from pier.server.errors import ServiceError
from pier.server.services.inputs import refuse_nul
from pier.server.state import ApiState

if TYPE_CHECKING:
    from pier.gateway.grants import Grant
    from pier.gateway.server import Gateway

# Providers whose API is OpenAI's Chat Completions, in the order a model both
# serve is tried: the vendor's own API first.
PASSTHROUGH = ("openai", "openrouter")
OWN, TRIAL = "collection", "trial"
# Body fields that would name an endpoint or a key (litellm's and the SDKs' names).
REDIRECTING = ("api_base", "api_key", "base_url", "custom_llm_provider", "extra_headers", "headers")
GRANT_TTL_S = 1800.0
MAX_NAMED = 8  # reachable models named in a refusal
SETTLE_S = 5.0  # how long a call's end waits for the gateway to count its answer


class Refused(Exception):
    """A passthrough request pier refuses, answered in OpenAI's error shape."""

    def __init__(self, status: int, kind: str, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.kind, self.message, self.param = status, kind, message, param


@dataclass
class Call:
    """One accepted passthrough call: the gateway's grant for it and what to send there."""

    collection: str
    provider: str
    model: str  # as the provider names it
    via: str  # OWN or TRIAL
    gateway: Gateway
    grant: Grant
    url: str  # the gateway's chat-completions URL for the grant
    body: bytes
    stream: bool
    hide_usage: bool  # pier asked the stream's usage chunk; the client did not


def collection_of(caller: Caller, jetty: Mapping[str, Any]) -> str:
    """The collection a call is made for: the token's, or (the admin's token) jetty.collection."""
    named = jetty.get("collection")
    if named is not None and not isinstance(named, str):
        raise Refused(400, "invalid_request_error", "jetty.collection must be a string", "jetty.collection")
    if named:
        try:
            return caller.check(named)
        except ServiceError as exc:
            raise Refused(403, "permission_denied", str(exc.detail), "jetty.collection") from None
    if caller.collection is None:
        raise Refused(
            400, "invalid_request_error",
            "the admin token belongs to no collection: name the one whose keys the call uses in "
            "jetty.collection, or use a collection token", "jetty.collection",
        )  # fmt: skip
    return caller.collection


def prepare(state: ApiState, caller: Caller, payload: dict[str, Any]) -> Call:
    """Check the request, choose the provider and key, open the gateway's grant."""
    refuse_nul(payload)  # a 422 naming the field, as every body's
    jetty = payload.get("jetty") or {}
    if not isinstance(jetty, dict):
        raise Refused(400, "invalid_request_error", "jetty must be an object", "jetty")
    for where, fields in (("", payload), ("jetty.", jetty)):
        for name in REDIRECTING:
            if name in fields:
                raise Refused(
                    400, "invalid_request_error",
                    f"{where}{name}: pier chooses where a model call goes and with which key (the "
                    "operator's upstream, the collection's key or the server's trial key); a request "
                    "cannot name either: remove it", f"{where}{name}",
                )  # fmt: skip
    model = payload.get("model")
    if not isinstance(model, str) or not model.strip():
        raise Refused(400, "invalid_request_error", "model: name the model to call", "model")
    collection = collection_of(caller, jetty)
    asked_trial = bool(jetty.get("use_trial_keys"))
    requested = jetty.get("model_provider")
    if requested is not None and requested not in PASSTHROUGH:
        raise Refused(
            400, "invalid_request_error",
            f"jetty.model_provider: {requested!r} is not a provider pier's passthrough reaches: it speaks "
            f"OpenAI's Chat Completions and reaches {', '.join(PASSTHROUGH)}", "jetty.model_provider",
        )  # fmt: skip
    own = _environment(state, collection)
    trial = state.dispatcher.trials.keys() if asked_trial else {}
    if asked_trial:
        try:
            state.dispatcher.trials.require(collection)
        except InputError as exc:
            raise Refused(400, "invalid_request_error", str(exc), "jetty.use_trial_keys") from None
    provider, provider_model, via = _route(state, collection, model, requested, own, trial, asked_trial)
    spec = PROVIDERS[provider]
    key = own[spec.key_env] if via == OWN else trial[spec.key_env]
    try:
        chosen = Upstreams.of(state.settings, collection).choose(
            provider, spec.base_url_env, spec.base_url, own.get(spec.base_url_env)
        )
    except InputError as exc:
        raise Refused(400, "invalid_request_error", str(exc), spec.base_url_env) from None
    if chosen.source == COLLECTION and via == TRIAL:
        raise Refused(
            400, "invalid_request_error",
            f"{spec.base_url_env}: this server's trial key for {provider} goes only to the operator's "
            f"upstream, never to the collection's own endpoint ({chosen.url}): set your own "
            f"{spec.key_env} in the collection's environment, or remove {spec.base_url_env}", spec.base_url_env,
        )  # fmt: skip
    if via == TRIAL:
        try:
            state.dispatcher.trials.take(collection)  # the trial's budget: each call counts as a run
        except InputError as exc:
            raise Refused(429, "insufficient_quota", str(exc), "jetty.use_trial_keys") from None
    stream = payload.get("stream") is True
    body = {k: v for k, v in payload.items() if k != "jetty"}
    body["model"] = provider_model
    hide_usage = False
    if stream:  # the stream's usage comes in a last chunk, only when asked
        given = body.get("stream_options")
        options = given if isinstance(given, dict) else {}
        hide_usage = options.get("include_usage") is not True
        body["stream_options"] = {**options, "include_usage": True}
    gateway = _gateway(state)
    # The grant's label is the run's trajectory id for an agent: here the call's own (its trace's id).
    grant = gateway.open(
        f"chat:{collection}:{uuid.uuid4().hex[:12]}",
        provider,
        key,
        chosen.url,
        Budget(),
        GRANT_TTL_S,
        allowed=chosen.allowed,
    )
    url = f"{gateway.base_url(grant)}/chat/completions"
    return Call(collection, provider, provider_model, via, gateway, grant, url, json.dumps(body).encode(),
                stream, hide_usage)  # fmt: skip


def finish(state: ApiState, call: Call) -> dict[str, Any]:
    """The call ended (answered, failed or hung up): close its grant and add
    what the gateway counted to the collection's usage. Returns the counts."""
    call.gateway.close(call.grant)
    # A client that hung up once it read the last chunk can be ahead of the
    # gateway, which counts the answer when its own relay of it ends.
    deadline = time.monotonic() + SETTLE_S
    used = call.grant.usage()
    while sum((used.get("answers") or {}).values()) < used.get("requests", 0) and time.monotonic() < deadline:
        time.sleep(0.01)
        used = call.grant.usage()
    errors = sum(n for status, n in (used.get("answers") or {}).items() if int(status) >= 400)
    state.store.add_model_usage(
        call.collection, call.provider, call.model, call.via,
        requests=used.get("requests", 0), errors=errors, prompt_tokens=used.get("prompt_tokens", 0),
        completion_tokens=used.get("completion_tokens", 0), cached_tokens=used.get("cached_tokens", 0),
        cost_usd=used.get("cost_usd", 0.0), unpriced_calls=used.get("unpriced_calls", 0),
    )  # fmt: skip
    return used


@dataclass(frozen=True)
class Usage:
    collection: str
    rows: list[dict[str, Any]]

    @property
    def totals(self) -> dict[str, Any]:
        keys = ("requests", "errors", "prompt_tokens", "completion_tokens", "cached_tokens", "unpriced_calls")
        totals: dict[str, Any] = {k: sum(int(r[k]) for r in self.rows) for k in keys}
        totals["total_tokens"] = totals["prompt_tokens"] + totals["completion_tokens"]
        totals["cost_usd"] = round(sum(float(r["cost_usd"]) for r in self.rows), 6)
        return totals


def usage(state: ApiState, collection: str) -> Usage:
    return Usage(collection, state.store.model_usage(collection))


def _environment(state: ApiState, collection: str) -> dict[str, str]:
    encrypted = state.store.get_env_encrypted(collection)
    return {name: state.vault.decrypt(value) for name, value in encrypted.items()}


def _gateway(state: ApiState) -> Gateway:
    """pier's model gateway on loopback (pier itself is the caller), shared with workflows' model steps."""
    from pier.gateway.server import shared_gateway  # its HTTP server loads on the first call

    return shared_gateway("127.0.0.1", 0, state.settings.ca_bundle, state.settings.outbound)


def candidates(model: str, requested: str | None = None) -> list[tuple[str, str]]:
    """(provider, the model as it names it) that could serve `model`, in order:
    `openrouter/<vendor>/<model>` names OpenRouter itself; otherwise the
    vendor's own API when it speaks Chat Completions (gpt-*, openai/...), then
    OpenRouter, which serves every vendor's."""
    head, slash, rest = model.partition("/")
    if slash and head == "openrouter":
        found = [("openrouter", rest)]
    else:
        found = [(p, model_for(p, model) or model) for p in PASSTHROUGH if serves(p, model)]
    return [c for c in found if requested is None or c[0] == requested]


def _route(
    state: ApiState, collection: str, model: str, requested: str | None,
    own: Mapping[str, str], trial: Mapping[str, str], asked_trial: bool,
) -> tuple[str, str, str]:  # fmt: skip
    """(provider, model as it names it, OWN or TRIAL) for `model`, the
    collection's own key first; else a 400 naming the variable to set, or a 404
    naming the models its keys reach."""
    found = candidates(model, requested)
    for source, keys in ((OWN, own), (TRIAL, trial)):
        for provider, name in found:
            if keys.get(PROVIDERS[provider].key_env):
                return provider, name, source
    reachable = [p for p in PASSTHROUGH if own.get(PROVIDERS[p].key_env) or trial.get(PROVIDERS[p].key_env)]
    needed = " or ".join(PROVIDERS[p].key_env for p, _ in found) or PROVIDERS["openrouter"].key_env
    set_it = f"set {needed} in collection {collection!r}'s environment (PATCH /api/v1/collections/{collection}/environment)"
    unused = [p.key_env for n, p in PROVIDERS.items() if n not in PASSTHROUGH and own.get(p.key_env)]
    note = (
        f" (its {', '.join(unused)} is not used here: the passthrough speaks OpenAI's Chat Completions and "
        f"reaches {', '.join(PASSTHROUGH)}; pier translates no other protocol)"
        if unused else ""
    )  # fmt: skip
    if not reachable:
        trial_hint = ""
        if not asked_trial and state.dispatcher.trials.available:
            trial_hint = "; or send jetty.use_trial_keys to use the server's trial keys"
        raise Refused(
            400, "missing_api_key", f"no provider key reaches model {model!r}: {set_it}{trial_hint}{note}"
        )
    models = [m for m in _listed(state, collection) if m.provider in reachable]
    named = ", ".join(
        f"{m.provider}/{m.id}" if m.provider == "openrouter" else m.id for m in models[:MAX_NAMED]
    )
    more = f" and {len(models) - MAX_NAMED} more" if len(models) > MAX_NAMED else ""
    raise Refused(
        404, "model_not_found",
        f"model {model!r} is not one collection {collection!r} reaches through pier (its keys reach "
        f"{', '.join(reachable)}: {named or 'their models'}{more}; GET /api/v1/models/{collection}/ lists "
        f"them): to reach it, {set_it}{note}", "model",
    )  # fmt: skip


def _listed(state: ApiState, collection: str) -> list[Any]:
    from pier.server.services.catalogue import models

    return models(state, collection)
