"""Experiment bodies: ExperimentSpec in (pier.experiments.spec), ExperimentPublic out."""

from __future__ import annotations

from pydantic import BaseModel, Field

from pier.server.models import ExperimentPublic as ExperimentPublic


class ExperimentRun(BaseModel):
    """One try of one attempt of a cell, and how its run went."""

    cell: int
    cell_key: str
    attempt: int
    retry: int
    trajectory_id: str
    status: str
    outcome: str | None = Field(
        None, description="success, failure, infra or cancelled: how the attempt counts"
    )
    run_outcome: str | None = Field(
        None,
        description="the run's own outcome (success, checks_failed, no_results, timed_out, provider_refused, "
        "infra, ...): docs/experiments.md#outcomes",
    )
    success: bool | None
    score: float | None
    cost_usd: float | None
    tokens: int
    duration_seconds: float | None
    failed_stage: str | None
    error: str | None
