"""OpenTelemetry traces, off unless the standard OTLP variables are set
(OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); then
spans go out over OTLP, over HTTP (http/protobuf, the default) or gRPC as
OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL says, the SDK's exporter reading the
rest of those variables.

One run is one trace, whichever processes touch it: the trace id IS the
trajectory id (both 128 bits), and the run's root span has an id derived from
it, so the server, a worker and the gateway each add their spans to the same
trace without handing a context around. Temporal's own spans join it too: the
server starts a run's workflow inside the run's root context, and temporalio's
OpenTelemetry interceptor carries that context to the workers.

Spans are written when what they describe has ended, with its recorded start
and end times, so nothing is held open across a process that may die.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

log = logging.getLogger(__name__)

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_tracer: Any = None
_provider: Any = None
_lock = threading.Lock()
_ids = threading.local()  # the ids the next span takes (the run's root span)


def enabled() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").lower() == "none":
        return False
    return any(os.environ.get(name) for name in ENDPOINT_VARIABLES)


def configure(service: str, exporter: Any = None) -> bool:
    """Start exporting this process's spans, when the OTLP variables ask for it
    (or to `exporter`, a test's span exporter, sent each span as it ends).
    Idempotent; returns whether tracing is on."""
    global _tracer, _provider
    if exporter is None and not enabled():
        return False
    with _lock:
        if _tracer is not None:
            return True
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

        class RunIds(RandomIdGenerator):
            """Random ids, except for a run's root span: its own ids."""

            def generate_span_id(self) -> int:
                preset = getattr(_ids, "span", None)
                return preset if preset is not None else super().generate_span_id()

            def generate_trace_id(self) -> int:
                preset = getattr(_ids, "trace", None)
                return preset if preset is not None else super().generate_trace_id()

        name = os.environ.get("OTEL_SERVICE_NAME") or service
        _provider = TracerProvider(resource=Resource.create({"service.name": name}), id_generator=RunIds())
        if exporter is None:
            _provider.add_span_processor(BatchSpanProcessor(otlp_exporter()))
        else:
            _provider.add_span_processor(SimpleSpanProcessor(exporter))
        _tracer = _provider.get_tracer("pier")
    log.info("tracing: spans exported over OTLP (%s) as %s", protocol(), name)
    return True


PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
PROTOCOLS = ("grpc", "http/protobuf")


def protocol() -> str:
    """The OTLP transport the standard variables ask for (the traces' own first):
    `grpc` or `http/protobuf` (the default); `http/json`, which the SDK's
    exporters do not speak, and anything else fall back to http/protobuf."""
    for name in PROTOCOL_VARIABLES:
        asked = os.environ.get(name, "").strip().lower()
        if asked:
            if asked not in PROTOCOLS:
                log.warning("tracing: %s=%s is not a protocol pier exports with (%s): http/protobuf it is",
                            name, asked, ", ".join(PROTOCOLS))  # fmt: skip
                return "http/protobuf"
            return asked
    return "http/protobuf"


def otlp_exporter() -> Any:
    """The SDK's OTLP span exporter for the protocol asked for; each reads the
    endpoint, headers, timeout, compression and TLS variables itself."""
    if protocol() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter()


def shutdown() -> None:
    """Send what is buffered (a process about to exit)."""
    global _tracer, _provider
    with _lock:
        if _provider is not None:
            _provider.shutdown()
        _tracer = _provider = None


def trace_id(trajectory_id: str) -> str | None:
    """The trace id a run's spans carry (hex), or None when tracing is off."""
    if _tracer is None:
        return None
    return f"{_trace_of(trajectory_id) or 1:032x}"


def _trace_of(trajectory_id: str) -> int | None:
    try:
        value = int(trajectory_id, 16)
    except ValueError:
        value = int(hashlib.sha256(trajectory_id.encode()).hexdigest()[:32], 16)
    return value or None


def _span_of(kind: str, trajectory_id: str) -> int:
    return int(hashlib.sha256(f"{kind}:{trajectory_id}".encode()).hexdigest()[:16], 16) or 1


def _root_span_of(trajectory_id: str) -> int:
    return _span_of("pier-run", trajectory_id)


# The tree of a run's trace: run -> stage -> (in run_agent) the agent ->
# its model calls. Every span's id is derived from the trajectory id (and
# what it is), so each process writes its spans into the tree without
# handing a context around: the gateway's model calls name the agent span
# as their parent before it is written (spans are written when they end).
AGENT_STAGE = "run_agent"


def _stage_span_of(trajectory_id: str, stage: str) -> int:
    return _span_of(f"pier-stage-{stage}", trajectory_id)


def _agent_span_of(trajectory_id: str) -> int:
    return _span_of("pier-agent", trajectory_id)


def _run_context(trajectory_id: str, span_id: int | None = None) -> Any:
    from opentelemetry import trace

    trace_value = _trace_of(trajectory_id) or 1
    parent = trace.SpanContext(
        trace_value,
        span_id or _root_span_of(trajectory_id),
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


def _start_with_id(span_id: int, name: str, **kwargs: Any) -> Any:
    """A span whose id is `span_id` (the tree's derived ids)."""
    assert _tracer is not None
    _ids.span = span_id
    try:
        return _tracer.start_span(name, **kwargs)
    finally:
        _ids.span = None


@contextmanager
def in_run(trajectory_id: str) -> Iterator[None]:
    """Spans started inside (a Temporal workflow start, say) join the run's trace."""
    if _tracer is None:
        yield
        return
    from opentelemetry import context

    token = context.attach(_run_context(trajectory_id))
    try:
        yield
    finally:
        context.detach(token)


def _ns(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1e9)


def run_span(record: Any) -> None:
    """The run's root span, from acceptance to its end (record: a pier.record.Trajectory)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    _ids.trace, _ids.span = _trace_of(record.trajectory_id), _root_span_of(record.trajectory_id)
    try:
        span = _tracer.start_span(
            f"run {record.collection}/{record.name}",
            context=trace.set_span_in_context(trace.INVALID_SPAN),
            kind=trace.SpanKind.INTERNAL,
            start_time=_ns(record.created),
            attributes={
                "pier.trajectory_id": record.trajectory_id,
                "pier.collection": record.collection,
                "pier.task": record.name,
                "pier.status": record.status.value,
                "pier.failed_stage": record.failed_stage or "",
                "pier.outcome": record.outcome or "",
            },
        )
    finally:
        _ids.trace = _ids.span = None
    if record.error:
        span.set_status(trace.Status(trace.StatusCode.ERROR, record.error[:500]))
    span.end(end_time=_ns(record.ended))


def stage_span(record: Any, step: Any) -> None:
    """One stage of a run, a child of its run's root span; the run_agent
    stage's child is the agent's span (`invoke_agent <agent>`), the parent of
    the agent's model calls."""
    if _tracer is None or step.started is None:
        return
    from opentelemetry import trace

    tid = record.trajectory_id
    failed = step.status.value == "failed"
    span = _start_with_id(
        _stage_span_of(tid, step.name),
        f"stage {step.name}",
        context=_run_context(tid),
        start_time=_ns(step.started),
        attributes={"pier.stage": step.name, "pier.status": step.status.value, "pier.trajectory_id": tid},
    )
    if failed:
        span.set_status(trace.Status(trace.StatusCode.ERROR, (step.detail or "")[:500]))
        span.set_attribute("error.type", "pier.stage_failed")
    if step.name == AGENT_STAGE:
        outputs = getattr(record, "outputs", None)
        agent = getattr(outputs, "agent", None) or "agent"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "pier.trajectory_id": tid,
        }
        model = getattr(outputs, "model", None)
        if model:
            attributes["gen_ai.request.model"] = model
        child = _start_with_id(
            _agent_span_of(tid),
            f"invoke_agent {agent}",
            context=_run_context(tid, _stage_span_of(tid, step.name)),
            kind=trace.SpanKind.INTERNAL,
            start_time=_ns(step.started),
            attributes=attributes,
        )
        if failed:
            child.set_status(trace.Status(trace.StatusCode.ERROR, (step.detail or "")[:500]))
            child.set_attribute("error.type", "pier.agent_failed")
        child.end(end_time=_ns(step.ended))
    span.end(end_time=_ns(step.ended))


def tool_span(trajectory_id: str, call: Any, agent_ended: datetime | None) -> None:
    """One tool call the agent's transcript shows (call: a
    pier.agents.toolcalls.ToolUse), as the GenAI conventions' execute_tool
    span, a child of the run's agent span; one with no result in the
    transcript ends with the agent."""
    if _tracer is None:
        return
    from opentelemetry import trace

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.call_id,
        "pier.trajectory_id": trajectory_id,
    }
    if call.error:
        attributes["error.type"] = call.error
    span = _tracer.start_span(
        f"execute_tool {call.name}",
        context=_run_context(trajectory_id, _agent_span_of(trajectory_id)),
        kind=trace.SpanKind.INTERNAL,
        start_time=_ns(call.started),
        attributes=attributes,
    )
    if call.error:
        span.set_status(trace.Status(trace.StatusCode.ERROR, call.error))
    ended = call.ended or agent_ended or call.started
    span.end(end_time=_ns(max(ended, call.started)))


def model_call_span(
    trajectory_id: str,
    *,
    provider: str,
    model: str | None,
    started_ns: int,
    status: int,
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read_tokens: int | None = None,
    address: str | None = None,
    port: int | None = None,
    response_model: str | None = None,
    response_id: str | None = None,
    finish_reasons: list[str] | None = None,
    error_type: str | None = None,
) -> None:
    """A model request through the gateway, as an OpenTelemetry GenAI client
    span (the inference span of the GenAI semantic conventions), a child of
    the run's agent span. error_type: why it failed when no HTTP status says
    it (pier refused the upstream, the provider could not be reached)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "http.response.status_code": status,
        "pier.trajectory_id": trajectory_id,
    }
    if model:
        attributes["gen_ai.request.model"] = model
    if input_tokens is not None:
        attributes["gen_ai.usage.input_tokens"] = input_tokens
    if output_tokens is not None:
        attributes["gen_ai.usage.output_tokens"] = output_tokens
    if cache_read_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = cache_read_tokens  # part of input_tokens
    if address:
        attributes["server.address"] = address
    if port:
        attributes["server.port"] = port
    if response_model:
        attributes["gen_ai.response.model"] = response_model
    if response_id:
        attributes["gen_ai.response.id"] = response_id
    if finish_reasons:
        attributes["gen_ai.response.finish_reasons"] = list(finish_reasons)
    if error_type or status >= 400:
        attributes["error.type"] = error_type or str(status)  # the conventions: a class, or the status code
    span = _tracer.start_span(
        f"chat {model}" if model else "chat",
        context=_run_context(trajectory_id, _agent_span_of(trajectory_id)),
        kind=trace.SpanKind.CLIENT,
        start_time=started_ns,
        attributes=attributes,
    )
    if error_type or status >= 400:
        span.set_status(trace.Status(trace.StatusCode.ERROR, error_type or f"HTTP {status}"))
    span.end()


def temporal_interceptors() -> list[Any]:
    """temporalio's OpenTelemetry interceptor when tracing is on (a Client's
    interceptors also serve the workers built on it)."""
    if _tracer is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor(_tracer)]
