"""litellm_chat and simple_judge steps against the scripted model server
(tests/support/model_server.py), through pier's model gateway: the platform's
simple-chat and model-comparison templates run unchanged, the provider's key
reaches only the provider, and each step's usage and cost is recorded from
what the gateway counted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pier.api.app import create_app
from tests.support.model_server import ModelServer, Recorded
from tests.support.wire import USAGE_IN, USAGE_OUT
from tests.unit.workflows.conftest import ADMIN, Api, make_settings

OPENAI_KEY = "sk-openai-" + "k" * 24
ANTHROPIC_KEY = "sk-ant-" + "a" * 24

# The platform's templates (skills/jetty/templates), as they are.
SIMPLE_CHAT = {
    "init_params": {"prompt": "Hello, how are you?", "model": "gpt-4o-mini",
                    "system_prompt": "You are a helpful assistant.", "temperature": 0.7},
    "step_configs": {"chat": {"activity": "litellm_chat", "model_path": "init_params.model",
                              "system_prompt_path": "init_params.system_prompt",
                              "prompt_path": "init_params.prompt", "temperature_path": "init_params.temperature"}},
    "steps": ["chat"],
}  # fmt: skip
MODEL_COMPARISON = {
    "init_params": {"prompt": "Explain quantum computing in simple terms", "model_a": "gpt-4o",
                    "model_b": "claude-3-5-sonnet-20241022", "judge_model": "gpt-4o", "temperature": 0.7},
    "step_configs": {
        "response_a": {"activity": "litellm_chat", "model_path": "init_params.model_a",
                       "prompt_path": "init_params.prompt", "temperature_path": "init_params.temperature"},
        "response_b": {"activity": "litellm_chat", "model_path": "init_params.model_b",
                       "prompt_path": "init_params.prompt", "temperature_path": "init_params.temperature"},
        "compare": {"activity": "simple_judge", "items": ["response_a.outputs.text", "response_b.outputs.text"],
                    "instruction": "Compare these two responses for clarity, accuracy, and helpfulness.",
                    "judge_type": "categorical", "categories": ["first_better", "second_better", "tie"],
                    "with_explanation": True, "model_path": "init_params.judge_model"},
    },
    "steps": ["response_a", "response_b", "compare"],
}  # fmt: skip


def _reply(item: Recorded) -> str:
    prompt = json.dumps(item.body)
    if "categories" in prompt:
        return '{"category": "second_better", "explanation": "b is clearer"}'
    if "Score from" in prompt:
        return 'Here: {"score": 4, "explanation": "good"}'
    return f"answer from {item.model}"


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = ModelServer("127.0.0.1", reply=_reply).start()
    yield server
    server.stop()


def _api(tmp_path: Path, server: ModelServer, allow: bool = True, **kw) -> Iterator[Api]:
    port = server.url.rsplit(":", 1)[1]
    # the operator lets collection team name the scripted server as its own endpoint
    own = {"collection_upstreams": {"team": [f"127.0.0.1:{port}"]}} if allow else {}
    settings = make_settings(tmp_path, **own, **kw)
    with TestClient(create_app(settings), headers={"Authorization": f"Bearer {ADMIN}"}) as c:
        assert c.post("/api/v1/collections", json={"name": "team"}).status_code in (200, 201)
        env = {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": server.url + "/v1",
               "ANTHROPIC_API_KEY": ANTHROPIC_KEY, "ANTHROPIC_BASE_URL": server.url}  # fmt: skip
        put = c.patch("/api/v1/collections/team/environment", json={"environment_variables": env})
        assert put.status_code == 200, put.text
        yield Api(c)


@pytest.fixture
def api(tmp_path: Path, model_server: ModelServer) -> Iterator[Api]:
    yield from _api(tmp_path, model_server)


def test_the_simple_chat_template_runs_through_the_gateway(api, model_server):
    assert api.task("chat", SIMPLE_CHAT).status_code in (200, 201)
    run = api.run("chat")
    assert run["status"] == "completed", run["error"]
    chat = run["steps"]["chat"]
    assert chat["outputs"]["text"] == "answer from gpt-4o-mini"
    (call,) = model_server.model_calls()
    assert call.path == "/v1/chat/completions" and call.credential == OPENAI_KEY
    assert call.body["messages"] == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello, how are you?"},
    ]
    assert call.body["temperature"] == 0.7
    usage = chat["outputs"]["usage"]
    assert (
        usage["requests"] == 1
        and usage["prompt_tokens"] == USAGE_IN
        and usage["completion_tokens"] == USAGE_OUT
    )
    assert usage["cost_usd"] > 0  # gpt-4o-mini has a list price
    assert run["usage"]["total_tokens"] == USAGE_IN + USAGE_OUT
    assert OPENAI_KEY not in json.dumps(run)


def test_the_model_comparison_template_runs_and_the_judge_compares(api, model_server):
    assert api.task("compare", MODEL_COMPARISON).status_code in (200, 201)
    run = api.run("compare")
    assert run["status"] == "completed", run["error"]
    steps = run["steps"]
    assert steps["response_a"]["outputs"]["text"] == "answer from gpt-4o"
    assert steps["response_b"]["outputs"]["text"] == "answer from claude-3-5-sonnet-20241022"
    assert steps["response_b"]["outputs"]["provider"] == "anthropic"
    judge = steps["compare"]["outputs"]
    assert judge["category"] == "second_better" and judge["explanation"] == "b is clearer"
    # the judge was shown both answers, read by path from the steps before it
    judge_call = model_server.model_calls()[-1]
    assert "answer from gpt-4o" in json.dumps(judge_call.body)
    assert "answer from claude-3-5-sonnet-20241022" in json.dumps(judge_call.body)
    apis = [c.api for c in model_server.model_calls()]
    assert apis.count("anthropic") == 1 and len(apis) == 3
    creds = {c.api: c.credential for c in model_server.model_calls()}
    assert creds["anthropic"] == ANTHROPIC_KEY
    assert run["usage"]["requests"] == 3 and run["usage"]["total_tokens"] == 3 * (USAGE_IN + USAGE_OUT)


def test_a_scale_judge_scores_one_item(api, model_server):
    wf = {
        "init_params": {"text": "a poem"},
        "step_configs": {"judge": {"activity": "simple_judge", "model": "gpt-4o", "item_path": "init_params.text",
                                   "instruction": "Rate it", "score_range": {"min": 1, "max": 5},
                                   "explanation_required": True}},
        "steps": ["judge"],
    }  # fmt: skip
    assert api.task("judge", wf).status_code in (200, 201)
    run = api.run("judge")
    assert run["status"] == "completed", run["error"]
    assert run["steps"]["judge"]["outputs"]["score"] == 4
    assert run["steps"]["judge"]["outputs"]["usage"]["requests"] == 1


def test_a_model_budget_refuses_the_second_call_and_fails_that_step(api, model_server):
    assert api.task("compare", MODEL_COMPARISON).status_code in (200, 201)
    run = api.run("compare", {"model_budget": {"requests": 1}})
    assert run["status"] == "failed" and run["failed_stage"] == "response_b", run["error"]
    assert "budget" in run["error"]
    assert len(model_server.model_calls()) == 1


def test_a_model_step_without_its_key_is_refused_before_it_runs(api):
    wf = {**SIMPLE_CHAT, "init_params": {**SIMPLE_CHAT["init_params"], "model": "gemini-2.0-flash"}}
    api.c.patch(
        "/api/v1/collections/team/environment", json={"environment_variables": {"OPENAI_API_KEY": None}}
    )
    assert api.task("chat", wf).status_code in (200, 201)
    refused = api.c.post("/api/v1/run/team/chat", data={"init_params": "{}"})
    assert refused.status_code == 422, refused.text
    assert "OPENAI_API_KEY" in refused.text and "step_configs.chat" in refused.text


def test_a_collections_base_url_cannot_point_pier_at_its_own_machine(tmp_path, model_server):
    # The attacker holds a collection token and sets OPENAI_BASE_URL to a
    # loopback service; the operator allowed no endpoint of the collection's
    # own: the run is refused and pier never connects.
    for api in _api(tmp_path, model_server, allow=False):
        assert api.task("chat", SIMPLE_CHAT).status_code in (200, 201)
        refused = api.c.post("/api/v1/run/team/chat", data={"init_params": "{}"})
        assert refused.status_code == 422, refused.text  # refused when the run is accepted
        assert "OPENAI_BASE_URL" in refused.text and "PIER_COLLECTION_UPSTREAMS" in refused.text
    assert model_server.requests == []


def test_the_reference_pages_model_comparison_with_a_list_of_item_paths_scores_both(api, model_server):
    # workflow-templates.md's version: items_path is a list of paths, a score range, literal models
    wf = {
        "init_params": {"prompt": "Explain quantum computing in simple terms"},
        "step_configs": {
            "model_a": {"activity": "litellm_chat", "model": "gpt-4o", "prompt_path": "init_params.prompt",
                        "temperature": 0.7},
            "model_b": {"activity": "litellm_chat", "model": "claude-3-sonnet-20240229",
                        "prompt_path": "init_params.prompt", "temperature": 0.7},
            "compare": {"activity": "simple_judge", "items_path": ["model_a.outputs.text", "model_b.outputs.text"],
                        "instruction": "Compare these responses for clarity and accuracy", "model": "gpt-4o",
                        "score_range": {"min": 1, "max": 5}, "explanation_required": True},
        },
        "steps": ["model_a", "model_b", "compare"],
    }  # fmt: skip
    assert api.task("compare2", wf).status_code in (200, 201)
    run = api.run("compare2")
    assert run["status"] == "completed", run["error"]
    judge = run["steps"]["compare"]
    assert judge["outputs"]["score"] == 4 and judge["outputs"]["explanation"] == "good"
    assert judge["inputs"]["items"] == ["answer from gpt-4o", "answer from claude-3-sonnet-20240229"]


def test_the_batch_processor_template_fans_a_chat_task_out_with_shared_child_params(api, model_server):
    child = {
        "init_params": {"item": "", "instruction": "", "model": "gpt-4o-mini"},
        "step_configs": {"process": {"activity": "litellm_chat", "model_path": "init_params.model",
                                     "system_prompt_path": "init_params.instruction", "prompt_path": "init_params.item"}},
        "steps": ["process"],
    }  # fmt: skip
    batch = {  # templates/batch-processor.json
        "init_params": {"items": ["item1", "item2", "item3"], "instruction": "Process this item and return the result",
                        "model": "gpt-4o-mini", "max_concurrency": 5,
                        "child_init_params": {"instruction": "Process this item and return the result",
                                              "model": "gpt-4o-mini"}},
        "step_configs": {
            "process_all": {"activity": "list_emit_await", "items_path": "init_params.items",
                            "child_workflow_name": "process-single-item", "item_param_name": "item",
                            "child_init_params_path": "init_params.child_init_params",
                            "max_concurrency_path": "init_params.max_concurrency"},
            "gather_results": {"activity": "extract_from_trajectories",
                               "trajectory_list_path": "process_all.outputs.trajectory_references",
                               "extract_keys": {"text": "process.outputs.text"}},
        },
        "steps": ["process_all", "gather_results"],
    }  # fmt: skip
    assert api.task("process-single-item", child).status_code in (200, 201)
    assert api.task("batch", batch).status_code in (200, 201)
    run = api.run("batch")
    assert run["status"] == "completed", run["error"]
    assert run["steps"]["gather_results"]["outputs"]["text"] == ["answer from gpt-4o-mini"] * 3
    systems = {c.body["messages"][0]["content"] for c in model_server.model_calls()}
    assert systems == {"Process this item and return the result"}  # child_init_params reached every child
    users = sorted(c.body["messages"][1]["content"] for c in model_server.model_calls())
    assert users == ["item1", "item2", "item3"]
