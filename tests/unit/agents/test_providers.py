import pytest

from pier.agents.providers import choose_provider, env_names, model_for, without_v1
from pier.agents.upstreams import COLLECTION, OPERATOR, Upstreams
from pier.errors import InputError
from pier.settings import Settings

CLAUDE = ("claude-code", ("anthropic", "openrouter", "bedrock"), "anthropic")


def choose(
    requested=None, model="claude-sonnet-4-5", env=None, agent=CLAUDE, upstreams=None, operator_keys=()
):
    name, supported, own = agent
    return choose_provider(
        name, supported, own, requested, model, env or {}, upstreams, frozenset(operator_keys)
    )


def upstreams(collection="acme", environ=None, **settings) -> Upstreams:
    return Upstreams.of(Settings(**settings), collection, environ or {})


def test_default_prefers_openrouter_then_bedrock_then_the_agents_own():
    both = {"OPENROUTER_API_KEY": "or-k", "AWS_BEARER_TOKEN_BEDROCK": "br-k", "ANTHROPIC_API_KEY": "an-k"}
    assert choose(env=both).name == "openrouter"
    assert choose(env={k: v for k, v in both.items() if k != "OPENROUTER_API_KEY"}).name == "bedrock"
    assert choose(env={"ANTHROPIC_API_KEY": "an-k"}).name == "anthropic"


def test_default_skips_providers_the_agent_cannot_use():
    gemini = ("gemini-cli", ("google",), "google")
    choice = choose(
        env={"OPENROUTER_API_KEY": "or-k", "GEMINI_API_KEY": "g-k"}, agent=gemini, model="gemini-2.5-pro"
    )
    assert choice.name == "google" and choice.key == "g-k"


def test_missing_key_names_the_variable():
    with pytest.raises(InputError, match="needs the API key in ANTHROPIC_API_KEY: set ANTHROPIC_API_KEY"):
        choose()
    with pytest.raises(InputError, match="model_provider openrouter needs the API key in OPENROUTER_API_KEY"):
        choose("openrouter", env={"ANTHROPIC_API_KEY": "an-k"})


def test_unsupported_provider_lists_the_supported_ones():
    with pytest.raises(
        InputError, match="cannot use model_provider 'google'; it supports anthropic, openrouter"
    ):
        choose("google", env={"GEMINI_API_KEY": "g"})


def test_the_endpoint_is_the_operators_and_a_runs_own_is_refused():
    """A run's environment (secret_params, the collection's environment) names no
    endpoint: the operator's setting, or pier's own environment, does."""
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:19555"}
    with pytest.raises(
        InputError, match=r"ANTHROPIC_BASE_URL: http://127\.0\.0\.1:19555 is not an upstream"
    ) as err:
        choose(env=env, upstreams=upstreams())
    assert "PIER_COLLECTION_UPSTREAMS" in str(err.value) and '{"acme": ["127.0.0.1:19555"]}' in str(err.value)
    with pytest.raises(InputError, match="is not an upstream"):
        choose(env=env)  # no upstreams given: the public APIs only
    assert choose(env={"ANTHROPIC_API_KEY": "k"}).base_url == "https://api.anthropic.com"
    by_setting = choose(
        env={"ANTHROPIC_API_KEY": "k"}, upstreams=upstreams(upstreams={"anthropic": "http://gw:1/"})
    )
    assert (by_setting.base_url, by_setting.upstream) == ("http://gw:1", OPERATOR)
    # pier's own environment (`pier run`'s shell): the same value in the run's is the operator's
    pier_env = upstreams(environ={"ANTHROPIC_BASE_URL": "http://gw:2"})
    same = choose(env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://gw:2/"}, upstreams=pier_env)
    assert (same.base_url, same.upstream) == ("http://gw:2", OPERATOR)
    assert [a.name for a in same.upstream_allowed] == ["gw"] and same.upstream_allowed[0].port == 2


@pytest.mark.parametrize(
    "url", ["http://[::ffff:127.0.0.1]:19555", "http://0177.0.0.1:19555", "http://2130706433:19555"]
)
def test_an_allowed_collection_endpoint_is_matched_as_the_address_it_spells(url):
    allowed = upstreams(collection_upstreams={"acme": ["127.0.0.1:19555"]})
    env = {"ANTHROPIC_API_KEY": "own", "ANTHROPIC_BASE_URL": url}
    choice = choose(env=env, upstreams=allowed)
    assert choice.upstream == COLLECTION and choice.base_url == url and choice.upstream_allowed
    with pytest.raises(InputError, match="is not an upstream"):  # another collection: not allowed
        choose(env=env, upstreams=upstreams("other", collection_upstreams={"acme": ["127.0.0.1:19555"]}))
    with pytest.raises(InputError, match="is not an upstream"):  # another port
        choose(env={**env, "ANTHROPIC_BASE_URL": "http://127.0.0.1:19556"}, upstreams=allowed)


def test_a_name_allowed_for_a_collection_grants_no_address():
    """The collection may control what its name resolves to: the gateway judges
    those addresses by the outbound policy, so the name lifts nothing there."""
    allowed = upstreams(collection_upstreams={"acme": ["llm.acme.example"]})
    choice = choose(env={"ANTHROPIC_API_KEY": "own", "ANTHROPIC_BASE_URL": "https://llm.acme.example/x"},
                    upstreams=allowed)  # fmt: skip
    assert choice.upstream == COLLECTION and choice.upstream_allowed == ()


def test_a_name_allowed_for_a_collection_that_resolves_here_is_refused_at_accept(monkeypatch):
    """The collection's name resolving to loopback now is refused before any
    sandbox, naming the outbound setting (the gateway judges it again at connect)."""
    import pier.outbound

    monkeypatch.setattr(pier.outbound, "system_resolver", lambda host, port: ["127.0.0.1"])
    allowed = upstreams(collection_upstreams={"acme": ["llm.acme.example"]})
    env = {"ANTHROPIC_API_KEY": "own", "ANTHROPIC_BASE_URL": "http://llm.acme.example:8000"}
    with pytest.raises(
        InputError, match=r"ANTHROPIC_BASE_URL: llm\.acme\.example:8000 is not an allowed destination"
    ):
        choose(env=env, upstreams=allowed)
    by_address = upstreams(collection_upstreams={"acme": ["127.0.0.1:8000"]})
    assert choose(
        env={**env, "ANTHROPIC_BASE_URL": "http://127.0.0.1:8000"}, upstreams=by_address
    ).upstream_allowed


def test_a_trial_key_never_goes_to_a_collections_own_endpoint():
    allowed = upstreams(collection_upstreams={"acme": ["10.1.2.3"]})
    env = {"ANTHROPIC_API_KEY": "sk-trial", "ANTHROPIC_BASE_URL": "http://10.1.2.3:8000"}
    with pytest.raises(InputError, match="trial key for anthropic goes only to the operator's upstream"):
        choose(env=env, upstreams=allowed, operator_keys={"ANTHROPIC_API_KEY"})
    assert choose(env={"ANTHROPIC_API_KEY": "sk-trial"}, upstreams=allowed,
                  operator_keys={"ANTHROPIC_API_KEY"}).upstream == "default"  # fmt: skip


def test_bad_upstream_settings_stop_pier():
    with pytest.raises(ValueError, match="PIER_UPSTREAMS"):
        Settings(upstreams={"anthropic": "ftp://x"})
    with pytest.raises(ValueError, match="PIER_COLLECTION_UPSTREAMS"):
        Settings(collection_upstreams={"acme": ["http://x/y"]})
    with pytest.raises(InputError, match="PIER_UPSTREAMS names nope"):
        upstreams(upstreams={"nope": "https://x"})


def test_bedrock_region():
    with pytest.raises(InputError, match="AWS_REGION"):
        choose("bedrock", env={"AWS_BEARER_TOKEN_BEDROCK": "t", "AWS_REGION": "x.evil.example#"})
    bedrock = choose("bedrock", env={"AWS_BEARER_TOKEN_BEDROCK": "t"})
    assert bedrock.env == {"AWS_REGION": "us-east-1"}
    assert (
        choose("bedrock", env={"AWS_BEARER_TOKEN_BEDROCK": "t", "AWS_REGION": "eu-west-1"}).env["AWS_REGION"]
        == "eu-west-1"
    )


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("openrouter", "claude-sonnet-4.5", "anthropic/claude-sonnet-4.5"),
        ("openrouter", "gpt-5", "openai/gpt-5"),
        ("openrouter", "gemini-2.5-pro", "google/gemini-2.5-pro"),
        ("openrouter", "meta-llama/llama-4", "meta-llama/llama-4"),
        ("anthropic", "anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("openai", "openai/gpt-5", "gpt-5"),
        ("openai", "gpt-5", "gpt-5"),
        ("bedrock", "us.anthropic.claude-sonnet-4-5-v1:0", "us.anthropic.claude-sonnet-4-5-v1:0"),
        ("anthropic", None, None),
    ],
)
def test_model_names_per_provider(provider, model, expected):
    assert model_for(provider, model) == expected


def test_env_names_cover_keys_endpoints_and_region():
    names = env_names(("anthropic", "openrouter", "bedrock"))
    assert {
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENROUTER_API_KEY",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_REGION",
    } <= set(names)
    assert "OPENAI_API_KEY" not in names


def test_without_v1():
    assert without_v1("https://openrouter.ai/api/v1") == "https://openrouter.ai/api"
    assert without_v1("https://api.anthropic.com") == "https://api.anthropic.com"
