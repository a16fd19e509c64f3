"""A task's runs in figures: counts by status, success rate, durations, cost."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from pier.record import RunStatus, Trajectory
from pier.server.models import DurationStats, TaskStats
from pier.server.services.ingest import COST_LABEL


def run_cost(record: Trajectory) -> float | None:
    """What the agent reported the run cost, else an ingested run's cost label."""
    step = record.steps.get("run")
    usage = getattr(step.outputs, "usage", None) if step else record.usage
    cost = usage.get("cost_usd") if isinstance(usage, dict) else None
    if isinstance(cost, int | float):
        return float(cost)
    for label in reversed(record.labels):
        if label.key == COST_LABEL:
            try:
                return float(label.value)
            except ValueError:
                return None
    return None


def durations(values: Sequence[float]) -> DurationStats:
    if not values:
        return DurationStats(count=0, mean=None, median=None, p95=None, min=None, max=None)
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return DurationStats(
        count=len(ordered),
        mean=round(statistics.fmean(ordered), 3),
        median=round(statistics.median(ordered), 3),
        p95=round(p95, 3),
        min=ordered[0],
        max=ordered[-1],
    )


def task_stats(collection: str, task: str, records: Sequence[Trajectory]) -> TaskStats:
    by_status = Counter(record.status.value for record in records)
    ended = [r for r in records if r.status.terminal]
    succeeded = sum(1 for r in ended if r.success or (r.success is None and r.status == RunStatus.completed))
    costs = [c for c in (run_cost(r) for r in records) if c is not None]
    return TaskStats(
        collection=collection,
        task=task,
        total=len(records),
        by_status={status.value: by_status.get(status.value, 0) for status in RunStatus},
        completed=by_status.get(RunStatus.completed.value, 0),
        failed=by_status.get(RunStatus.failed.value, 0),
        success_rate=round(succeeded / len(ended), 4) if ended else None,
        duration_seconds=durations([r.duration_seconds for r in ended if r.duration_seconds is not None]),
        cost_usd=round(sum(costs), 6),
        cost_runs=len(costs),
    )
