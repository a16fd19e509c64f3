"""A run's side of the gateway: the routed provider choice, the sandbox's
environment without provider keys, the model budget from frontmatter and
settings, and usage merged from the CLI and the gateway."""

from __future__ import annotations

import httpx
import pytest

from pier.agents import get_agent
from pier.agents.providers import PROVIDERS, ProviderChoice
from pier.errors import InputError
from pier.gateway import Budget, Gateway, ModelRoute, without_provider_keys
from pier.lifecycle.plan import RunInputs, build_plan
from pier.lifecycle.verdict import run_usage
from pier.runbook import parse
from pier.settings import Settings
from pier.tasks import resolve, task_from_runbook

KEY = "sk-real"


@pytest.fixture
def gateway():
    made = Gateway("127.0.0.1", transport=httpx.MockTransport(lambda r: httpx.Response(200))).start()
    yield made
    made.stop()


def plan_of(front: str, env: dict | None = None, run: dict | None = None, **settings):
    step = resolve(task_from_runbook(parse(f"---\n{front}\n---\nDo it.\n")), run)
    return build_plan(step, RunInputs("run-1", "c", "t", env or {}), Settings(**settings))


def test_a_routed_launch_holds_the_token_and_the_gateway_url_never_the_key(gateway):
    plan = plan_of("agent: claude-code\nmodel: claude-sonnet-4-5", {"ANTHROPIC_API_KEY": KEY})
    route = ModelRoute(gateway, "run-1", Budget(), ttl_s=60)
    launch = get_agent("claude-code").launch(plan, route)
    assert route.grant is not None and route.grant.key == KEY
    assert route.grant.upstream == "https://api.anthropic.com"
    assert launch.env["ANTHROPIC_API_KEY"] == route.grant.token
    assert launch.env["ANTHROPIC_BASE_URL"] == f"{gateway.url}/anthropic"
    assert "pier's model gateway" in launch.summary
    everything = repr(launch)
    assert KEY not in everything
    route.close()
    assert gateway.grants.find(route.grant.token) is None


def test_codex_config_points_at_the_gateway(gateway):
    plan = plan_of(
        "agent: codex\nmodel: gpt-5", {"OPENAI_API_KEY": KEY}, upstreams={"openai": "http://up:9/v1"}
    )
    route = ModelRoute(gateway, "run-1", Budget(), ttl_s=60)
    launch = get_agent("codex").launch(plan, route)
    config = next(iter(launch.credential_files.values())).decode()
    assert f'base_url = "{gateway.url}/openai/v1"' in config
    assert route.grant.upstream == "http://up:9/v1" and KEY not in repr(launch)


def test_bedrock_routes_to_the_regional_endpoint_but_not_for_opencode(gateway):
    env = {"AWS_BEARER_TOKEN_BEDROCK": KEY, "AWS_REGION": "eu-west-1"}
    route = ModelRoute(gateway, "run-1", Budget(), ttl_s=60)
    plan = plan_of("agent: claude-code\nmodel: claude-x\nmodel_provider: bedrock", env)
    launch = get_agent("claude-code").launch(plan, route)
    assert route.grant.upstream == "https://bedrock-runtime.eu-west-1.amazonaws.com"
    assert launch.env["AWS_BEARER_TOKEN_BEDROCK"] == route.grant.token
    unrouted = ModelRoute(gateway, "run-2", Budget(), ttl_s=60)
    plan = plan_of("agent: opencode\nmodel: anthropic/claude-x\nmodel_provider: bedrock", env)
    get_agent("opencode").launch(plan, unrouted)
    assert unrouted.grant is None


def test_the_sandbox_env_loses_every_provider_key_and_copies_of_the_routed_one(gateway):
    route = ModelRoute(gateway, "run-1", Budget(), ttl_s=60)
    route(ProviderChoice(PROVIDERS["anthropic"], KEY, "https://api.anthropic.com", None))
    env = {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": "sk-other", "MY_COPY": KEY, "TOPIC": "rust"}
    assert without_provider_keys(env, route.grant) == {"TOPIC": "rust"}
    assert without_provider_keys(env, None) == env


def test_model_budget_from_frontmatter_over_settings_and_bad_values_named():
    plan = plan_of(
        "agent: script\nmodel_budget: {tokens: 5000}", gateway_max_requests=40, gateway_max_tokens=9
    )
    assert plan.model_budget == Budget(requests=40, tokens=5000)
    assert plan_of("agent: script", run={"model_budget": {"cost_usd": 0.5}}).model_budget.cost_usd == 0.5
    with pytest.raises(InputError, match=r"model_budget\.requests: .*greater than or equal to 1"):
        plan_of("agent: script\nmodel_budget: {requests: 0}")
    with pytest.raises(InputError, match=r"model_budget\.dollars: Extra inputs"):
        plan_of("agent: script\nmodel_budget: {dollars: 3}")


def test_usage_is_the_gateways_with_the_cli_report_beside_it_never_summed():
    """claude-code reported $0.023322 where the provider billed $0.0246 through
    the gateway: the record's figures are the gateway's, the CLI's kept apart."""
    seen = {"requests": 3, "api_calls": 3, "prompt_tokens": 4499, "completion_tokens": 673,
            "total_tokens": 5172, "cost_usd": 0.0246, "cost_source": "provider"}  # fmt: skip
    cli = {"prompt_tokens": 4444, "completion_tokens": 666, "total_tokens": 5110, "cost_usd": 0.023322,
           "api_calls": 2}  # fmt: skip
    usage = run_usage(cli, seen)
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (4499, 673, 5172)
    assert usage["cost_usd"] == 0.0246 and usage["cost_source"] == "provider" and usage["api_calls"] == 3
    assert usage["source"] == "gateway" and usage["agent_reported"] == cli and usage["gateway"] == seen
    assert run_usage({}, seen)["total_tokens"] == 5172
    # without the gateway (PIER_GATEWAY=false) the CLI's own figures are all there is, and say so
    assert run_usage(cli, None) == {**cli, "source": "agent"}
    assert run_usage({}, None) == {}


def test_through_the_gateway_the_real_upstream_stays_out_of_the_sandbox(gateway):
    """OPENROUTER_BASE_URL and the other endpoint variables name the real upstream
    (credentials in it, sometimes): the gateway holds it, the sandbox does not."""
    route = ModelRoute(gateway, "run-1", Budget(), ttl_s=60)
    route(ProviderChoice(PROVIDERS["openrouter"], KEY, "https://user:pw@proxy.corp/api/v1", None))
    env = {"OPENROUTER_API_KEY": KEY, "OPENROUTER_BASE_URL": "https://user:pw@proxy.corp/api/v1",
           "ANTHROPIC_BASE_URL": "https://a.corp", "TOPIC": "rust"}  # fmt: skip
    assert without_provider_keys(env, route.grant) == {"TOPIC": "rust"}
    assert route.grant.upstream == "https://user:pw@proxy.corp/api/v1"
