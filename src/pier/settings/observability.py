"""What an operator sees: metrics, traces (the OTEL_* variables), the audit log."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator


class ObservabilitySettings(BaseModel):
    """Prometheus metrics, the trace viewer's link, the audit log's retention
    (traces themselves are configured by the standard OTEL_* variables)."""

    metrics_token: SecretStr | None = Field(
        None,
        description="bearer token a scraper sends for /metrics on the API's port (the admin token works too)",
    )
    metrics_address: str | None = Field(
        None,
        description="host:port of a /metrics listener of its own, no token (pier serve and pier worker)",
    )
    metrics_collections: bool = Field(
        False, description="label run metrics with their collection (one series per collection)"
    )
    audit_retention_days: float = Field(90, gt=0, description="audit entries older than this are deleted")
    log_format: Literal["text", "json"] = Field(
        "text", description="json: every log line of pier serve, pier worker and the CLI is one JSON object"
    )
    trace_url: str | None = Field(
        None, description="a trace viewer's URL with {trace_id}, linked from the web UI's run page"
    )

    @field_validator("metrics_address")
    @classmethod
    def _metrics_address(cls, value: str | None) -> str | None:
        if value is not None:
            _, sep, port = value.rpartition(":")
            if not sep or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{value!r} is no host:port (e.g. 127.0.0.1:9464)")
        return value
