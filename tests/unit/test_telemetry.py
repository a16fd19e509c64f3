"""Metrics and traces from a real run on the fake backend and from the gateway:
the counts equal what the record holds, one trace per run keyed by its
trajectory id with a span per stage, model calls as GenAI client spans, and no
series labelled with anything unbounded."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from pier.gateway import Budget, Gateway
from pier.lifecycle.runner import STAGES
from pier.outbound import parse_allowed
from pier.record import RunStatus
from pier.sandbox.fake import FakeEngine, Script
from pier.telemetry import metrics, tracing
from tests.support.model_server import ModelServer
from tests.unit.lifecycle.test_run_on_fake import start, write_results


@pytest.fixture
def engine(monkeypatch) -> FakeEngine:
    monkeypatch.setattr("pier.sandbox._registered", {})
    return FakeEngine()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.shutdown()
    assert tracing.configure("pier-test", exporter=exporter)
    yield exporter
    tracing.shutdown()


def samples(name: str) -> dict[tuple[tuple[str, str], ...], float]:
    body, _ = metrics.exposition()
    found = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def value(name: str, **labels: str) -> float:
    return sum(v for k, v in samples(name).items() if set(labels.items()) <= set(k))


def test_a_run_counts_its_end_and_stages_and_is_one_trace_with_a_span_per_stage(tmp_path, engine, spans):
    ended = value("pier_runs_ended_total", status="completed")
    prepared = value("pier_stage_duration_seconds_count", stage="prepare")
    record = start(tmp_path, engine, Script().on(r"script\.sh", write_results))
    assert record.status == RunStatus.completed, record.error
    assert value("pier_runs_ended_total", status="completed") == ended + 1
    assert value("pier_stage_duration_seconds_count", stage="prepare") == prepared + 1
    mine = [s for s in spans.get_finished_spans() if s.attributes.get("pier.trajectory_id") == record.trajectory_id
            or s.name.startswith("stage ")]  # fmt: skip
    traces = {f"{s.context.trace_id:032x}" for s in mine}
    assert traces == {record.trajectory_id}, "one trace per run, its id the trajectory id"
    root = next(s for s in mine if s.name.startswith("run "))
    stages = [s for s in mine if s.name.startswith("stage ")]
    assert sorted(s.name for s in stages) == sorted(f"stage {name}" for name, _ in STAGES)
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in stages)
    assert root.attributes["pier.status"] == "completed"


def test_no_series_is_labelled_with_a_trajectory_id(tmp_path, engine):
    record = start(tmp_path, engine, Script().on(r"script\.sh", write_results))
    body, _ = metrics.exposition()
    assert record.trajectory_id not in body.decode()


KEY = "sk-real-provider-key"


def provider(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"id": "m1", "usage": {"input_tokens": 100, "output_tokens": 20}})


def test_a_model_call_is_a_genai_client_span_and_its_tokens_are_counted(spans):
    gateway = Gateway("127.0.0.1", transport=httpx.MockTransport(provider)).start()
    try:
        grant = gateway.open("ab" * 16, "anthropic", KEY, "https://api.anthropic.com", Budget(), 60)
        before_in = value("pier_gateway_tokens_total", provider="anthropic", type="input")
        before_out = value("pier_gateway_tokens_total", provider="anthropic", type="output")
        answer = httpx.post(f"{gateway.base_url(grant)}/v1/messages", headers={"x-api-key": grant.token},
                            json={"model": "claude-sonnet-4-5", "messages": []})  # fmt: skip
        assert answer.status_code == 200
        usage = grant.usage()
    finally:
        gateway.stop()
    assert (
        value("pier_gateway_tokens_total", provider="anthropic", type="input") - before_in
        == usage["prompt_tokens"]
    )
    assert (
        value("pier_gateway_tokens_total", provider="anthropic", type="output") - before_out
        == usage["completion_tokens"]
    )
    assert (
        value("pier_gateway_requests_total", provider="anthropic", model="claude-sonnet-4-5", status="200")
        >= 1
    )
    chat = [s for s in spans.get_finished_spans() if s.name.startswith("chat")]
    assert len(chat) == 1
    attributes = chat[0].attributes
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert attributes["gen_ai.usage.input_tokens"] == usage["prompt_tokens"] == 100
    assert attributes["gen_ai.usage.output_tokens"] == usage["completion_tokens"] == 20
    assert f"{chat[0].context.trace_id:032x}" == "ab" * 16, "the call is in its run's trace"


def test_a_sandbox_cannot_blow_up_the_model_label():
    names = {metrics.model_label("label-test", f"model-{n}") for n in range(metrics.MAX_MODELS + 50)}
    assert len(names) == metrics.MAX_MODELS + 1 and "other" in names


def test_tracing_is_off_and_free_without_the_otlp_variables(monkeypatch):
    for name in tracing.ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    tracing.shutdown()
    assert not tracing.configure("pier-test")
    assert tracing.trace_id("ab" * 16) is None


# (provider, path, body, the finish reasons and the id's start the answer gives)
CALLS = {
    "anthropic": ("anthropic", "/v1/messages", {"max_tokens": 8}, ["end_turn"], "msg_"),
    "anthropic-stream": (
        "anthropic",
        "/v1/messages",
        {"max_tokens": 8, "stream": True},
        ["end_turn"],
        "msg_",
    ),
    "chat": ("openai", "/v1/chat/completions", {}, ["stop"], "chatcmpl-"),
    "chat-stream": ("openai", "/v1/chat/completions", {"stream": True}, ["stop"], "chatcmpl-"),
    "responses": ("openai", "/v1/responses", {}, ["completed"], "resp_"),
    "responses-stream": ("openai", "/v1/responses", {"stream": True}, ["completed"], "resp_"),
    "gemini": ("google", "/v1beta/models/gemini-2.5-pro:generateContent", {}, ["STOP"], None),
}


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = ModelServer("127.0.0.1").start()
    yield server
    server.stop()


def _call(model_server: ModelServer, provider: str, path: str, body: dict, upstream: str | None = None,
          allow: bool = True) -> int:  # fmt: skip
    upstream = upstream or model_server.url
    port = int(upstream.rsplit(":", 1)[1])
    gateway = Gateway("127.0.0.1").start()
    try:
        grant = gateway.open("cd" * 16, provider, KEY, upstream, Budget(), 60,
                             allowed=parse_allowed(f"127.0.0.1:{port}") if allow else ())  # fmt: skip
        model = (
            "gemini-2.5-pro" if provider == "google" else "gpt-5" if provider == "openai" else "claude-x-1"
        )
        sent = {"model": model, "messages": [{"role": "user", "content": "hi"}], "input": "hi", **body}
        answer = httpx.post(f"{gateway.base_url(grant)}{path}", headers={"authorization": f"Bearer {grant.token}"},
                            json=sent, timeout=30)  # fmt: skip
        answer.read()
        return answer.status_code
    finally:
        gateway.stop()


@pytest.mark.parametrize("kind", sorted(CALLS))
def test_a_model_calls_span_says_what_answered_as_the_genai_conventions_name_it(spans, model_server, kind):
    provider, path, body, reasons, id_start = CALLS[kind]
    assert _call(model_server, provider, path, body) == 200
    (chat,) = [s for s in spans.get_finished_spans() if s.name.startswith("chat")]
    attributes = chat.attributes
    (sent,) = model_server.model_calls()
    assert attributes["gen_ai.request.model"] == sent.model
    assert attributes["gen_ai.response.model"] == sent.model, "the model the answer names"
    assert list(attributes["gen_ai.response.finish_reasons"]) == reasons
    if id_start is None:
        assert "gen_ai.response.id" not in attributes
    else:
        assert attributes["gen_ai.response.id"].startswith(id_start)
    assert attributes["gen_ai.usage.input_tokens"] == 100
    assert attributes["gen_ai.usage.output_tokens"] == 20
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["server.port"] == int(model_server.url.rsplit(":", 1)[1])
    assert "error.type" not in attributes


def test_a_failed_model_call_names_its_error_type(spans, model_server):
    model_server.mode = "429"
    assert _call(model_server, "anthropic", "/v1/messages", {"max_tokens": 8}) == 429
    with socket.socket() as closed:  # a port nothing listens on: the provider cannot be reached
        closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]
    assert _call(model_server, "anthropic", "/v1/messages", {}, upstream=f"http://127.0.0.1:{dead}") == 502
    assert _call(model_server, "anthropic", "/v1/messages", {}, allow=False) == 403
    limited, unreachable, refused = [s for s in spans.get_finished_spans() if s.name.startswith("chat")]
    assert limited.attributes["error.type"] == "429", "the provider's answer: its status code"
    assert limited.attributes["http.response.status_code"] == 429
    assert unreachable.attributes["error.type"] == "httpx.ConnectError", "no answer: the exception's class"
    assert refused.attributes["error.type"] == "upstream_refused", "pier would not connect"
    assert all(s.status.status_code.name == "ERROR" for s in (limited, unreachable, refused))
    assert len(model_server.model_calls()) == 1, "only the first reached the provider"


def test_a_cached_prompt_is_counted_as_the_conventions_cache_read_tokens(spans):
    def cached(request: httpx.Request) -> httpx.Response:
        usage = {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 5}
        return httpx.Response(200, json={"id": "msg_1", "model": "claude-x-1", "stop_reason": "end_turn",
                                         "usage": usage})  # fmt: skip

    gateway = Gateway("127.0.0.1", transport=httpx.MockTransport(cached)).start()
    try:
        grant = gateway.open("ef" * 16, "anthropic", KEY, "https://api.anthropic.com", Budget(), 60)
        answer = httpx.post(f"{gateway.base_url(grant)}/v1/messages", headers={"x-api-key": grant.token},
                            json={"model": "claude-x-1", "messages": []})  # fmt: skip
        assert answer.status_code == 200
    finally:
        gateway.stop()
    (chat,) = [s for s in spans.get_finished_spans() if s.name.startswith("chat")]
    assert chat.attributes["gen_ai.usage.input_tokens"] == 100, "input_tokens holds the cached part"
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 90


def test_the_traces_own_protocol_variable_wins_and_an_unsendable_one_falls_back(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    assert tracing.protocol() == "grpc"
    assert type(tracing.otlp_exporter()).__module__.endswith("proto.grpc.trace_exporter")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    assert tracing.protocol() == "http/protobuf"
    assert "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json" in caplog.text
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL")
    assert type(tracing.otlp_exporter()).__module__.endswith("proto.http.trace_exporter")
