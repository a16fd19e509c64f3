"""A run's trace over OTLP/gRPC, to a real gRPC receiver on 127.0.0.1 (the
collector's TraceService, keeping what it is sent): a claude-code run on the
fake backend whose agent makes a real model call through pier's gateway to the
scripted model server, then prints the stream-json transcript of a tool call.
The trace is one tree, run -> stage run_agent -> invoke_agent -> the model
call (a GenAI client span with the response's model, id and finish reasons,
server.address and server.port, the usage) and the tool call (execute_tool,
at the transcript's times)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent import futures
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from pier.lifecycle.start import RunRequest, Services, run
from pier.record import RunStatus
from pier.runbook import parse
from pier.sandbox import register_backend
from pier.sandbox.fake import FakeBackend, FakeEngine, Script, replied
from pier.settings import Settings
from pier.tasks import task_from_runbook
from pier.telemetry import tracing
from tests.support.model_server import ModelServer

RUNBOOK = """---
agent: claude-code
model: claude-sonnet-4-5
---
# write the answer

Write the answer to /app/results/answer.md.
"""
TOOL_STARTED = datetime(2026, 11, 30, 9, 55, 13, 527000, tzinfo=UTC)
TOOL_TOOK = timedelta(milliseconds=48)


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """The OTLP trace service: every span of every export it is sent."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.exports = 0
        self.lock = threading.Lock()

    def Export(self, request, context):
        with self.lock:
            self.exports += 1
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.spans.extend(scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
def collector(monkeypatch) -> Iterator[Collector]:
    found = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(found, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED",
                 "OTEL_TRACES_EXPORTER"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    tracing.shutdown()
    assert tracing.configure("pier-test")
    try:
        yield found
    finally:
        tracing.shutdown()
        server.stop(grace=None)


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = ModelServer("127.0.0.1").start()
    yield server
    server.stop()


def agent(answered: list[dict]):
    """claude-code as the fake runs it: one model call through the gateway (the
    URL and token the launch gave it), then the stream-json of a Write call."""

    def reply(sandbox, call):
        base, token = call.env["ANTHROPIC_BASE_URL"], call.env["ANTHROPIC_API_KEY"]
        tools = [{"name": "Write", "input_schema": {"type": "object", "properties": {
            "file_path": {"type": "string"}, "content": {"type": "string"}}}}]  # fmt: skip
        answer = httpx.post(f"{base}/v1/messages", headers={"x-api-key": token}, timeout=30,
                            json={"model": "claude-sonnet-4-5", "max_tokens": 64, "tools": tools,
                                  "messages": [{"role": "user", "content": "write it"}]})  # fmt: skip
        assert answer.status_code == 200, answer.text
        message = answer.json()
        answered.append(message)
        use = next(b for b in message["content"] if b["type"] == "tool_use")
        sandbox.put_files("/app/results", {"answer.md": b"42\n"})
        ended = TOOL_STARTED + TOOL_TOOK
        events = [
            {"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-sonnet-4-5"},
            {"type": "assistant", "timestamp": TOOL_STARTED.isoformat(), "session_id": "s1",
             "message": {"id": message["id"], "model": message["model"], "role": "assistant",
                         "content": [use], "usage": message["usage"]}},
            {"type": "user", "timestamp": ended.isoformat(), "session_id": "s1",
             "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                                      "content": "written"}]}},
            {"type": "result", "subtype": "success", "is_error": False, "result": "done", "session_id": "s1"},
        ]  # fmt: skip
        return replied("\n".join(json.dumps(event) for event in events) + "\n")

    return reply


def test_a_run_exports_its_trace_tree_over_otlp_grpc(tmp_path: Path, monkeypatch, collector, model_server):
    monkeypatch.setattr("pier.sandbox._registered", {})
    answered: list[dict] = []
    script = Script().on(r"--output-format", agent(answered))
    engine = FakeEngine()
    register_backend("fake-grpc", lambda settings: FakeBackend(settings, engine=engine, program=script))
    port = int(model_server.url.rsplit(":", 1)[1])
    settings = Settings(home=tmp_path / "home", ca_bundle=None, sandbox_backend="fake-grpc",
                        gateway_host="127.0.0.1", upstreams={"anthropic": model_server.url},
                        collection_upstreams={"tests": [f"127.0.0.1:{port}"]})  # fmt: skip
    request = RunRequest(collection="tests", task_name="t", task=task_from_runbook(parse(RUNBOOK)),
                         env={"ANTHROPIC_API_KEY": "sk-ant-real", "ANTHROPIC_BASE_URL": model_server.url})  # fmt: skip
    record = run(Services(settings), request)
    assert record.status == RunStatus.completed, record.error
    tracing.shutdown()  # sends what the batch holds

    assert collector.exports >= 1
    spans = collector.spans
    tid = record.trajectory_id
    assert {span.trace_id.hex() for span in spans} == {tid}, "one trace, its id the trajectory id"
    root = next(s for s in spans if s.name.startswith("run "))
    stage = next(s for s in spans if s.name == "stage run_agent")
    invoke = next(s for s in spans if s.name == "invoke_agent claude-code")
    assert stage.parent_span_id == root.span_id
    assert invoke.parent_span_id == stage.span_id
    (chat,) = [s for s in spans if s.name.startswith("chat")]
    assert chat.parent_span_id == invoke.span_id, "the model call hangs off the agent"
    assert chat.kind == Span.SpanKind.SPAN_KIND_CLIENT
    attributes = _attributes(chat)
    (message,) = answered
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert attributes["gen_ai.response.model"] == message["model"]
    assert attributes["gen_ai.response.id"] == message["id"]
    assert attributes["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert attributes["gen_ai.usage.input_tokens"] == 100
    assert attributes["gen_ai.usage.output_tokens"] == 20
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["server.port"] == port
    assert "error.type" not in attributes
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.name == "execute_tool Write"
    assert tool.parent_span_id == invoke.span_id, "the tool call hangs off the agent"
    assert tool.kind == Span.SpanKind.SPAN_KIND_INTERNAL
    found = _attributes(tool)
    assert found["gen_ai.operation.name"] == "execute_tool"
    assert found["gen_ai.tool.name"] == "Write"
    assert found["gen_ai.tool.call.id"] == message["content"][0]["id"]
    assert tool.start_time_unix_nano == int(TOOL_STARTED.timestamp() * 1e9), "the transcript's time"
    assert tool.end_time_unix_nano - tool.start_time_unix_nano == int(TOOL_TOOK.total_seconds() * 1e9)


def _attributes(span: Span) -> dict[str, object]:
    found: dict[str, object] = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            found[kv.key] = [getattr(v, v.WhichOneof("value")) for v in value.array_value.values]
        else:
            found[kv.key] = getattr(value, kind)
    return found
