"""pier's Prometheus metrics: one module-level family per measure, in base units,
named by Prometheus's rules (`_total` counters, `_seconds`, `_bytes`).

Labels are bounded: stage, status, operation, provider, model, outcome,
templated HTTP routes. A trajectory id is never a label. A collection is one
only when the operator allows it (PIER_METRICS_COLLECTIONS), since a server may
hold many; otherwise it is "-".

Everything here is cheap when nobody scrapes: an increment is a lock and an add.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import (
    PLATFORM_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric

disable_created_metrics()  # no *_created series: they double what a scrape sends
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
REGISTRY.register(PLATFORM_COLLECTOR)

# Run and stage times span a second to half an hour; sandbox operations and
# HTTP requests milliseconds to a minute.
RUN_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)
FAST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

_collections = False  # PIER_METRICS_COLLECTIONS: collections as a label


def allow_collection_labels(allowed: bool) -> None:
    global _collections
    _collections = allowed


def collection_label(collection: str | None) -> str:
    return (collection or "-") if _collections else "-"


runs_accepted = Counter(
    "pier_runs_accepted_total", "Runs accepted (stored and queued)", ["collection"], registry=REGISTRY
)
runs_started = Counter(
    "pier_runs_started_total", "Runs whose lifecycle started", ["collection"], registry=REGISTRY
)
runs_ended = Counter(
    "pier_runs_ended_total",
    "Runs that reached an end, by status, the stage that failed ('' when none) and outcome "
    "(success, checks_failed, no_results, agent_failed, timed_out, limit_reached, provider_refused, "
    "rate_limited, provider_error, budget_exhausted, invalid, step_failed, infra, cancelled)",
    ["collection", "status", "failed_stage", "outcome"],
    registry=REGISTRY,
)
run_duration = Histogram(
    "pier_run_duration_seconds", "A run from start to end", ["status"], buckets=RUN_BUCKETS, registry=REGISTRY
)
queue_wait = Histogram(
    "pier_run_queue_wait_seconds",
    "From a run's acceptance to its lifecycle's start",
    buckets=RUN_BUCKETS,
    registry=REGISTRY,
)
queue_length = Gauge("pier_run_queue_length", "Runs accepted and waiting for a slot", registry=REGISTRY)
runs_running = Gauge("pier_runs_running", "Runs this process executes now", registry=REGISTRY)
stage_duration = Histogram(
    "pier_stage_duration_seconds",
    "One stage of a run, by stage and how it ended",
    ["stage", "status"],
    buckets=RUN_BUCKETS,
    registry=REGISTRY,
)
sandbox_operation = Histogram(
    "pier_sandbox_operation_duration_seconds",
    "Sandbox operations on the engine: create, setup, delete, by the runtime sandboxes run under",
    ["operation", "runtime"],
    buckets=FAST_BUCKETS,
    registry=REGISTRY,
)
sandboxes_live = Gauge("pier_sandboxes_live", "Run sandboxes this process holds now", registry=REGISTRY)
pool_size = Gauge("pier_warm_pool_size", "Ready, unclaimed sandboxes in the warm pool", registry=REGISTRY)
pool_claims = Counter(
    "pier_warm_pool_claims_total", "Warm pool look-ups by result (hit, miss)", ["result"], registry=REGISTRY
)
agent_install = Histogram(
    "pier_agent_install_duration_seconds",
    "Installing or pinning an agent CLI in a sandbox",
    ["agent"],
    buckets=RUN_BUCKETS,
    registry=REGISTRY,
)
gateway_requests = Counter(
    "pier_gateway_requests_total",
    "Model requests through the gateway by provider, model and HTTP status",
    ["provider", "model", "status"],
    registry=REGISTRY,
)
gateway_tokens = Counter(
    "pier_gateway_tokens_total",
    "Tokens the gateway counted, by type (input, output, cache_read)",
    ["provider", "model", "type"],
    registry=REGISTRY,
)
gateway_cost = Counter(
    "pier_gateway_cost_usd_total",
    "List price of the tokens counted, USD",
    ["provider", "model"],
    registry=REGISTRY,
)
gateway_duration = Histogram(
    "pier_gateway_request_duration_seconds",
    "A model request through the gateway, until its answer ended",
    ["provider", "model"],
    buckets=(*FAST_BUCKETS, 120, 300),
    registry=REGISTRY,
)
gateway_ttfb = Histogram(
    "pier_gateway_time_to_first_byte_seconds",
    "A model request through the gateway, until the answer's first bytes",
    ["provider", "model"],
    buckets=(*FAST_BUCKETS, 120, 300),
    registry=REGISTRY,
)
egress_connections = Counter(
    "pier_egress_connections_total",
    "Connections sandboxes asked the egress proxy for, by decision (allowed, refused)",
    ["decision"],
    registry=REGISTRY,
)
webhook_deliveries = Counter(
    "pier_webhook_deliveries_total",
    "Webhook delivery attempts by outcome (delivered, failed, gave_up) and attempt number (1..5, more)",
    ["outcome", "attempt"],
    registry=REGISTRY,
)
routine_ticks = Counter(
    "pier_routine_ticks_total", "Routine ticks by outcome (fired, missed)", ["outcome"], registry=REGISTRY
)
sandboxes_swept = Counter(
    "pier_sandboxes_swept_total",
    "Sandboxes the sweep removed because no live run needed them (a leak that was cleaned)",
    registry=REGISTRY,
)
http_requests = Counter(
    "pier_http_requests_total",
    "API requests by method, templated route and status",
    ["method", "route", "status"],
    registry=REGISTRY,
)
http_duration = Histogram(
    "pier_http_request_duration_seconds",
    "API requests by method and templated route",
    ["method", "route"],
    buckets=FAST_BUCKETS,
    registry=REGISTRY,
)


# A sandbox names the model it asks for, so the model label is capped: past
# MAX_MODELS distinct names a provider's further ones count as "other".
MAX_MODELS = 64
_models: dict[str, set[str]] = {}
_models_lock = threading.Lock()


def model_label(provider: str, model: str | None) -> str:
    if not model:
        return "-"
    with _models_lock:
        seen = _models.setdefault(provider, set())
        if model in seen:
            return model
        if len(seen) >= MAX_MODELS:
            return "other"
        seen.add(model)
        return model


def attempt_label(attempt: int) -> str:
    return str(attempt) if attempt <= 5 else "more"


def watch_queue(length: Callable[[], int], running: Callable[[], int]) -> None:
    """The queue gauges read the executor (or the store) when scraped; one that
    cannot be read (the database is down) is NaN, and the rest still scrape."""
    queue_length.set_function(_or_nan(length))
    runs_running.set_function(_or_nan(running))


def _or_nan(read: Callable[[], int]) -> Callable[[], float]:
    def safe() -> float:
        try:
            return float(read())
        except Exception:
            return math.nan

    return safe


class _Readiness:
    """`pier_ready{service}`: 1 when a service the server needs answers, 0 when
    not, probed when scraped (the same probes as /health/ready). Nothing is
    exported until a server says how to probe (watch_readiness)."""

    def __init__(self) -> None:
        self.probe: Callable[[], dict[str, bool]] | None = None

    def collect(self) -> Iterator[Metric]:

        probe = self.probe
        if probe is None:
            return
        family = GaugeMetricFamily(
            "pier_ready",
            "1 when a service the server needs answers (as /health/ready), else 0",
            labels=["service"],
        )
        try:
            answers = probe()
        except Exception:
            answers = {}
        for service, ok in sorted(answers.items()):
            family.add_metric([service], 1.0 if ok else 0.0)
        yield family

    def describe(self) -> list[Metric]:  # registered before a probe exists: nothing to call at registration
        return []


_readiness = _Readiness()
REGISTRY.register(_readiness)


def watch_readiness(probe: Callable[[], dict[str, bool]] | None) -> None:
    """Set (or, with None, clear) what `pier_ready` probes when scraped:
    service name -> whether it answers."""
    _readiness.probe = probe


def exposition() -> tuple[bytes, str]:
    """The registry in Prometheus's text format, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE


def serve(address: str) -> None:
    """A listener of its own for /metrics (a `pier worker`, or a server whose
    operator binds metrics to an address rather than guarding them by token)."""
    from prometheus_client import start_http_server

    host, _, port = address.rpartition(":")
    start_http_server(int(port), addr=host.strip("[]") or "127.0.0.1", registry=REGISTRY)
