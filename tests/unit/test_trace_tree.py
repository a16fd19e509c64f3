"""A run's trace is a tree: run -> stage -> (run_agent) the agent's span
`invoke_agent <agent>` -> the gateway's model calls `chat <model>`, with the
GenAI attributes (operation, provider, request model, usage, server.address
and server.port, error.type on a failed call), whichever process writes each."""

from __future__ import annotations

import httpx

from pier.gateway import Budget, Gateway
from pier.record import RunStatus
from pier.sandbox.fake import Script
from tests.unit.lifecycle.test_run_on_fake import start, write_results
from tests.unit.test_telemetry import engine, spans  # noqa: F401 - fixtures

KEY = "sk-test-key-for-the-tree"


def answered(request: httpx.Request) -> httpx.Response:
    if b"overloaded" in request.content:
        return httpx.Response(529, json={"type": "error", "error": {"type": "overloaded_error"}})
    return httpx.Response(200, json={"id": "msg_1", "model": "claude-sonnet-4-5",
                                     "usage": {"input_tokens": 10, "output_tokens": 2}})  # fmt: skip


def test_model_calls_hang_off_the_agent_which_hangs_off_run_agent(tmp_path, engine, spans):  # noqa: F811
    record = start(tmp_path, engine, Script().on(r"script\.sh", write_results))
    assert record.status == RunStatus.completed, record.error
    tid = record.trajectory_id
    gateway = Gateway("127.0.0.1", transport=httpx.MockTransport(answered)).start()
    try:
        grant = gateway.open(tid, "anthropic", KEY, "https://api.anthropic.com", Budget(), 60)
        for content in ("hello", "overloaded"):
            httpx.post(f"{gateway.base_url(grant)}/v1/messages", headers={"x-api-key": grant.token},
                       json={"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": content}]})  # fmt: skip
    finally:
        gateway.stop()
    mine = [s for s in spans.get_finished_spans() if f"{s.context.trace_id:032x}" == tid]
    by_name = {s.name: s for s in mine}
    root = next(s for s in mine if s.name.startswith("run "))
    stage = by_name["stage run_agent"]
    agent = by_name[f"invoke_agent {record.outputs.agent}"]
    chats = [s for s in mine if s.name.startswith("chat")]
    assert stage.parent.span_id == root.context.span_id
    assert agent.parent.span_id == stage.context.span_id
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert len(chats) == 2
    assert all(c.parent.span_id == agent.context.span_id for c in chats), "model calls are the agent's"
    ok, failed = sorted(chats, key=lambda c: c.attributes["http.response.status_code"])
    assert ok.attributes["server.address"] == "api.anthropic.com" and ok.attributes["server.port"] == 443
    assert ok.attributes["gen_ai.provider.name"] == "anthropic"
    assert ok.attributes["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert "error.type" not in ok.attributes
    assert failed.attributes["error.type"] == "529"
    others = [s for s in mine if s.name.startswith("stage ") and s.name != "stage run_agent"]
    assert others and all(s.parent.span_id == root.context.span_id for s in others)
