"""The chat-completions endpoint's passthrough mode (no runbook `jetty` block),
driven by the official OpenAI Python SDK against a real `pier serve` whose
operator upstream for openai (PIER_UPSTREAMS) is the scripted model server on
127.0.0.1, which records every request and the headers it came with:

- the answer, streamed and not, is the provider's, through pier's gateway;
- the key the provider sees is the collection's own, or the operator's trial
  key when the request asks for it; never the token or a key the request sent;
- a request that tries to aim the call elsewhere (headers, a body naming an
  endpoint or a key, the collection's own OPENAI_BASE_URL) reaches nothing at
  the other address: a listener there counts 0 connections;
- what each call used is added to the collection's usage;
- another collection's token cannot spend this collection's key, and no token
  is a 401.

Each refusal says what to do: the variable to set, the models reachable, the
setting that would allow an endpoint."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from openai import APIStatusError, OpenAI
from tests.support.api_server import ADMIN_TOKEN, Collection, Server
from tests.support.model_server import ModelServer
from tests.support.tenancy import HangingReceiver
from tests.support.wire import USAGE_IN, USAGE_OUT

pytestmark = pytest.mark.integration

OWN_KEY = "sk-own-" + uuid.uuid4().hex
TRIAL_KEY = "sk-trial-" + uuid.uuid4().hex
MODEL = "gpt-4o-mini"  # in the price table, so its cost is known


@pytest.fixture(scope="module")
def provider() -> Iterator[ModelServer]:
    made = ModelServer("127.0.0.1").start()
    yield made
    made.stop()


@pytest.fixture(scope="module")
def decoy() -> Iterator[HangingReceiver]:
    """Where a tenant would like the call to go: it must see no connection."""
    made = HangingReceiver()
    yield made
    made.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory, provider: ModelServer) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("pier-passthrough")
    settings = {
        "PIER_UPSTREAMS": json.dumps(
            {"openai": f"{provider.url}/v1", "openrouter": f"{provider.url}/api/v1"}
        ),
        "PIER_TRIAL_KEYS": json.dumps({"OPENAI_API_KEY": TRIAL_KEY}),
        "PIER_TRIAL_RUNS": "2",
    }
    srv = Server(home=home, db_url=f"sqlite:///{home / 'pier.db'}", settings=settings).start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def fresh(provider: ModelServer) -> None:
    provider.clear()


def collection(server: Server, env: dict[str, str] | None = None) -> Collection:
    name = f"pass-{uuid.uuid4().hex[:10]}"
    with server.client(ADMIN_TOKEN) as admin:
        r = admin.post("/api/v1/collections", json={"name": name})
        assert r.status_code == 201, r.text
    made = Collection(name=name, token=r.json()["token"], server=server, image="")
    if env:
        with made.client() as c:
            r = c.patch(f"/api/v1/collections/{name}/environment", json={"environment_variables": env})
            assert r.status_code == 200, r.text
    return made


@pytest.fixture
def keyed(server: Server) -> Collection:
    return collection(server, {"OPENAI_API_KEY": OWN_KEY})


def sdk(made: Collection, token: str | None = None, **options) -> OpenAI:
    return OpenAI(base_url=f"{made.server.url}/v1", api_key=token or made.token, max_retries=0, timeout=60,
                  **options)  # fmt: skip


def usage(made: Collection) -> dict:
    with made.client() as c:
        r = c.get(f"/api/v1/collections/{made.name}/usage")
    assert r.status_code == 200, r.text
    return r.json()


def hello() -> list[dict]:
    return [{"role": "user", "content": "Say hello."}]


def test_passthrough_answers_with_the_collections_key(keyed: Collection, provider: ModelServer):
    answer = sdk(keyed).chat.completions.create(model=MODEL, messages=hello())
    assert answer.choices[0].message.content == "ok"
    assert answer.usage is not None and answer.usage.prompt_tokens == USAGE_IN
    [call] = provider.model_calls("chat")
    assert call.path == "/v1/chat/completions" and call.body["model"] == MODEL
    assert call.credential == OWN_KEY  # the collection's key, never its pier token
    assert not any(keyed.token in value for value in call.headers.values())
    found = usage(keyed)
    [row] = found["models"]
    assert (row["provider"], row["model"], row["via"]) == ("openai", MODEL, "collection")
    assert (row["requests"], row["prompt_tokens"], row["completion_tokens"]) == (1, USAGE_IN, USAGE_OUT)
    assert row["cost_usd"] > 0 and found["totals"]["total_tokens"] == USAGE_IN + USAGE_OUT


def test_streaming_passthrough_relays_the_chunks(keyed: Collection, provider: ModelServer):
    chunks = list(sdk(keyed).chat.completions.create(model=f"openai/{MODEL}", messages=hello(), stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "ok"
    assert chunks[-1].choices[0].finish_reason == "stop"  # the usage chunk pier asked for is not passed on
    [call] = provider.model_calls("chat")
    assert call.credential == OWN_KEY and call.body["model"] == MODEL  # openai/ is the vendor, not the name
    assert call.body["stream"] is True and call.body["stream_options"] == {"include_usage": True}
    # asked for by the client, the usage chunk comes through
    asked = list(sdk(keyed).chat.completions.create(
        model=MODEL, messages=hello(), stream=True, stream_options={"include_usage": True}
    ))  # fmt: skip
    assert asked[-1].choices == [] and asked[-1].usage.completion_tokens == USAGE_OUT
    [row] = usage(keyed)["models"]
    assert (row["requests"], row["prompt_tokens"], row["completion_tokens"]) == (
        2,
        2 * USAGE_IN,
        2 * USAGE_OUT,
    )


def test_a_request_cannot_aim_the_call_elsewhere(
    server: Server, keyed: Collection, provider: ModelServer, decoy: HangingReceiver
):
    aimed = {"X-Forwarded-Host": decoy.url.split("/")[2],
             "OpenAI-Base-URL": decoy.url, "X-Api-Key": "sk-tenant", "Forwarded": f"host={decoy.url}"}  # fmt: skip
    answer = sdk(keyed, default_headers=aimed).chat.completions.create(model=MODEL, messages=hello())
    assert answer.choices[0].message.content == "ok"
    [call] = provider.model_calls("chat")
    assert call.credential == OWN_KEY
    assert not {"x-forwarded-host", "openai-base-url", "x-api-key", "forwarded"} & set(call.headers)
    for field in ("base_url", "api_base", "api_key"):
        with pytest.raises(APIStatusError) as refused:
            sdk(keyed).chat.completions.create(model=MODEL, messages=hello(), extra_body={field: decoy.url})
        assert refused.value.status_code == 400 and field in refused.value.message
    # the collection's own endpoint, which the operator did not allow it
    aiming = collection(server, {"OPENAI_API_KEY": OWN_KEY, "OPENAI_BASE_URL": decoy.url})
    with pytest.raises(APIStatusError) as refused:
        sdk(aiming).chat.completions.create(model=MODEL, messages=hello())
    assert refused.value.status_code == 400
    assert "OPENAI_BASE_URL" in refused.value.message and "PIER_COLLECTION_UPSTREAMS" in refused.value.message
    time.sleep(0.5)
    assert decoy.connections == 0
    assert len(provider.model_calls("chat")) == 1


def test_trial_keys_only_when_asked(server: Server, provider: ModelServer):
    keyless = collection(server)
    with pytest.raises(APIStatusError) as refused:
        sdk(keyless).chat.completions.create(model=MODEL, messages=hello())
    assert refused.value.status_code == 400
    assert "OPENAI_API_KEY" in refused.value.message and "use_trial_keys" in refused.value.message
    assert provider.model_calls("chat") == []
    answer = sdk(keyless).chat.completions.create(
        model=MODEL, messages=hello(), extra_body={"jetty": {"use_trial_keys": True}}
    )
    assert answer.choices[0].message.content == "ok"
    [call] = provider.model_calls("chat")
    assert call.credential == TRIAL_KEY and "jetty" not in call.body
    assert usage(keyless)["models"][0]["via"] == "trial"
    with keyless.client() as c:
        assert c.get(f"/api/v1/trial/{keyless.name}").json()["runs_used"] == 1  # the trial's budget


def test_another_collections_token_cannot_use_its_key(
    server: Server, keyed: Collection, provider: ModelServer
):
    other = collection(server)
    with pytest.raises(APIStatusError) as refused:
        sdk(keyed, token=other.token).chat.completions.create(
            model=MODEL, messages=hello(), extra_body={"jetty": {"collection": keyed.name}}
        )
    assert refused.value.status_code == 403
    with pytest.raises(APIStatusError) as refused:  # its own collection has no key
        sdk(other).chat.completions.create(model=MODEL, messages=hello())
    assert refused.value.status_code == 400 and "OPENAI_API_KEY" in refused.value.message
    assert provider.model_calls("chat") == []
    assert usage(keyed)["models"] == []


def test_no_token_is_401(keyed: Collection, provider: ModelServer):
    for headers in ({}, {"Authorization": f"Bearer {OWN_KEY}"}):  # none, or a provider key in its place
        r = httpx.post(f"{keyed.server.url}/v1/chat/completions", headers=headers,
                       json={"model": MODEL, "messages": hello()})  # fmt: skip
        assert r.status_code == 401, r.text
    assert provider.model_calls("chat") == []


def test_unreachable_model_names_the_reachable_ones(keyed: Collection, provider: ModelServer):
    with pytest.raises(APIStatusError) as refused:
        sdk(keyed).chat.completions.create(model="claude-sonnet-4-5", messages=hello())
    assert refused.value.status_code == 404
    message = refused.value.message
    assert (
        "gpt-4o" in message and f"/api/v1/models/{keyed.name}/" in message and "OPENROUTER_API_KEY" in message
    )
    with pytest.raises(APIStatusError) as refused:
        sdk(keyed).chat.completions.create(
            model=MODEL, messages=hello(), extra_body={"jetty": {"model_provider": "anthropic"}}
        )
    assert refused.value.status_code == 400 and "openai, openrouter" in refused.value.message
    assert provider.model_calls("chat") == []


def test_other_vendors_models_go_through_openrouter(server: Server, provider: ModelServer):
    both = collection(server, {"OPENROUTER_API_KEY": "sk-or-" + OWN_KEY, "ANTHROPIC_API_KEY": "sk-ant-x"})
    answer = sdk(both).chat.completions.create(model="claude-sonnet-4-5", messages=hello())
    assert answer.choices[0].message.content == "ok"
    [call] = provider.model_calls("chat")
    assert call.path == "/api/v1/chat/completions" and call.body["model"] == "anthropic/claude-sonnet-4-5"
    assert call.credential == "sk-or-" + OWN_KEY
    assert usage(both)["models"][0]["provider"] == "openrouter"
    # a key whose API speaks another protocol reaches nothing here, and the refusal says so
    anthropic_only = collection(server, {"ANTHROPIC_API_KEY": "sk-ant-x"})
    with pytest.raises(APIStatusError) as refused:
        sdk(anthropic_only).chat.completions.create(model="claude-sonnet-4-5", messages=hello())
    assert refused.value.status_code == 400
    assert (
        "OPENROUTER_API_KEY" in refused.value.message
        and "ANTHROPIC_API_KEY is not used" in refused.value.message
    )
    assert len(provider.model_calls("chat")) == 1


def test_the_providers_refusal_comes_back_with_its_status(keyed: Collection, provider: ModelServer):
    provider.mode = "429"
    with pytest.raises(APIStatusError) as refused:
        sdk(keyed).chat.completions.create(model=MODEL, messages=hello())
    assert refused.value.status_code == 429 and "rate limit" in refused.value.message
    [row] = usage(keyed)["models"]
    assert (row["requests"], row["errors"], row["prompt_tokens"]) == (1, 1, 0)


def test_the_api_v1_alias_answers_too(keyed: Collection, provider: ModelServer):
    client = OpenAI(base_url=f"{keyed.server.url}/api/v1", api_key=keyed.token, max_retries=0, timeout=60)
    assert client.chat.completions.create(model=MODEL, messages=hello()).choices[0].message.content == "ok"
    assert [c.credential for c in provider.model_calls("chat")] == [OWN_KEY]
