"""`pier serve`: tokens and keys, run slots, limits before the routes, quotas
per collection, webhooks, routines, uploads, trial keys, experiments, the web UI."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field, SecretStr


def _default_concurrency() -> int:
    # One run per core: a run's own work is mostly in its sandbox, and the
    # default sandbox asks for 4 CPUs, so more would only oversubscribe.
    return max(1, os.cpu_count() or 1)


class ServerSettings(BaseModel):
    """The run API: who may call it, how many runs it holds, what it accepts
    before a route sees a request, and what each collection may use."""

    admin_token: SecretStr | None = Field(None, description="bearer token that manages collections")
    secret_key: SecretStr | None = Field(
        None, description="Fernet key for collection environment values; default <home>/secret.key"
    )
    max_concurrent_runs: int = Field(
        default_factory=_default_concurrency, ge=1, description="runs this server executes at once"
    )
    max_upload_bytes: int = Field(512 * 1024 * 1024, ge=1, description="per upload request, else 413")
    # Limits before the routes: nothing unbounded before authentication.
    max_json_bytes: int = Field(1 << 20, ge=1, description="a request body other than an upload, else 413")
    max_json_depth: int = Field(64, ge=2, le=500, description="nesting of a JSON body, else 422")
    http_header_timeout_sec: float = Field(
        10.0,
        gt=0,
        description="a request's line and headers must arrive within this (the first request's: of the connection)",
    )
    http_body_idle_sec: float = Field(
        30.0, gt=0, description="the most time between two pieces of a request body"
    )
    http_keepalive_sec: int = Field(5, ge=1, description="an idle connection is closed after this")
    drain_timeout_sec: float = Field(
        1800.0,
        ge=0,
        description="on SIGTERM, how long pier serve and pier worker wait for runs in flight before ending them",
    )
    http_max_head_bytes: int = Field(
        32 << 10, ge=1024, description="a request's line and headers together, else 431 and closed"
    )
    http_max_line_bytes: int = Field(
        8 << 10, ge=256, description="the request line (else 414) or one header line (else 431)"
    )
    http_max_connections_per_address: int = Field(
        256, ge=1, description="connections one client address holds at once; one more is answered 429"
    )
    # Quotas per collection: server defaults the admin can override per collection.
    quota_concurrent_runs: int | None = Field(
        None, ge=1, description="runs of one collection at once; default: all of the server's slots"
    )
    quota_queued_runs: int = Field(100, ge=0, description="runs of one collection waiting for a slot")
    quota_streams_per_token: int = Field(20, ge=1, description="live log streams open per token")
    quota_upload_bytes: int = Field(2 << 30, ge=0, description="one collection's stored uploads, in all")
    quota_output_bytes: int = Field(50 << 30, ge=0, description="one collection's stored run outputs, in all")
    routine_poll_sec: float = Field(
        10, gt=0, description="how often the server looks for due routines (a tick fires at most this late)"
    )
    upload_ttl_sec: float = Field(
        24 * 3600,
        gt=0,
        description="uploads are deleted this long after they were made, once no run needs them",
    )
    # Webhooks: a durable queue in the database, delivered per collection.
    webhook_backoff_sec: float = Field(
        1.0, ge=0, description="first retry delay; doubles each time, up to 5 minutes"
    )
    webhook_window_sec: float = Field(
        6 * 3600, gt=0, description="how long after a run ended its webhook is still retried"
    )
    webhook_attempt_timeout_sec: float = Field(
        10.0, gt=0, description="connect, send and answer timeout of one webhook attempt"
    )
    webhook_lane: int = Field(2, ge=1, description="webhook attempts at once per collection")
    trial_keys: dict[str, SecretStr] = Field(
        default_factory=dict,
        description='shared provider keys for trial runs, JSON: {"ANTHROPIC_API_KEY": "..."}',
    )
    trial_runs: int = Field(10, ge=0, description="trial runs per collection")
    # Experiments (pier.experiments): a task over a matrix, scheduled by the server.
    experiment_poll_sec: float = Field(
        1.0, gt=0, description="how often the server starts an experiment's next runs and notes ended ones"
    )
    experiment_lease_sec: float = Field(
        30, gt=0, description="a server that stopped hands its experiments on after this long"
    )
    experiment_max_runs: int = Field(100_000, ge=1, description="runs one experiment may start, at most")
    web_behind_tls: bool = Field(
        False, description="the web UI is reached over HTTPS through a proxy: its cookie is Secure"
    )
