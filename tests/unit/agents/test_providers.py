import pytest

from pier.agents.providers import choose_provider, env_names, model_for, without_v1
from pier.errors import InputError

CLAUDE = ("claude-code", ("anthropic", "openrouter", "bedrock"), "anthropic")


def choose(requested=None, model="claude-sonnet-4-5", env=None, agent=CLAUDE):
    name, supported, own = agent
    return choose_provider(name, supported, own, requested, model, env or {})


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


def test_endpoint_override_and_bedrock_region():
    choice = choose(env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://gw:1/"})
    assert choice.base_url == "http://gw:1"
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
