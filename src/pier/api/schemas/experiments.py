"""Experiment bodies: ExperimentSpec in (pier.experiments.spec), ExperimentPublic out."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from pier.experiments.service import Experiment


class ExperimentPublic(BaseModel):
    id: str
    collection: str
    name: str
    task: str = Field(description="the task its runs are of (the experiment's name for a runbook)")
    status: str = Field(description="running, completed, cancelled, or stopped (a budget was reached)")
    reason: str | None = Field(None, description="why it stopped")
    created_at: datetime
    ended_at: datetime | None
    cells: int
    attempts: int
    runs_total: int = Field(description="cells x attempts")
    definition: dict[str, Any]
    results: dict[str, Any] | None = Field(
        None, description="per cell, per axis, in total, and comparisons (the single read includes it)"
    )

    @classmethod
    def of(cls, experiment: Experiment, results: dict[str, Any] | None = None) -> ExperimentPublic:
        stored = experiment.stored
        return cls(
            id=stored.id, collection=stored.collection, name=stored.name, task=stored.task,
            status=stored.status, reason=stored.reason, created_at=stored.created_at,
            ended_at=stored.ended_at, cells=len(experiment.cells), attempts=experiment.spec.attempts,
            runs_total=experiment.total_runs, definition=stored.definition, results=results,
        )  # fmt: skip


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
