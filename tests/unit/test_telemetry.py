"""Metrics and traces from a real run on the fake backend and from the gateway:
the counts equal what the record holds, one trace per run keyed by its
trajectory id with a span per stage, model calls as GenAI client spans, and no
series labelled with anything unbounded."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from pier.gateway import Budget, Gateway
from pier.lifecycle.runner import STAGES
from pier.record import RunStatus
from pier.sandbox.fake import FakeEngine, Script
from pier.telemetry import metrics, tracing
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
