from __future__ import annotations

from pier.record import Label, RunStatus, Trajectory, utcnow
from pier.server.services.stats import run_cost, task_stats


def _run(tid: str, status: RunStatus, duration: float | None, cost: float | None = None, passed=True):
    record = Trajectory.new(tid, "c", "t")
    if cost is not None:
        record.outputs.usage = {"cost_usd": cost}
    if status.terminal:
        record.finish(status, utcnow(), duration)
        if not passed:
            record.outputs.success = False
    else:
        record.status = status
    return record


def test_stats_count_statuses_rate_ended_runs_and_sum_reported_costs():
    runs = [
        _run("a", RunStatus.completed, 10.0, 0.5),
        _run("b", RunStatus.completed, 30.0, 0.25, passed=False),  # ran, but a check failed
        _run("c", RunStatus.failed, 20.0),
        _run("d", RunStatus.running, None, 9.0),
    ]
    stats = task_stats("c", "t", runs)
    assert stats.total == 4 and stats.by_status["completed"] == 2 and stats.by_status["running"] == 1
    assert stats.by_status["archived"] == 0 and (stats.completed, stats.failed) == (2, 1)
    assert stats.success_rate == round(1 / 3, 4), "only ended runs count, and success needs the checks"
    d = stats.duration_seconds
    assert (d.count, d.mean, d.median, d.min, d.max, d.p95) == (3, 20.0, 20.0, 10.0, 30.0, 30.0)
    assert (stats.cost_usd, stats.cost_runs) == (9.75, 3)


def test_no_ended_run_has_no_rate_and_an_ingested_cost_label_counts():
    assert task_stats("c", "t", []).success_rate is None
    record = Trajectory.new("x", "c", "t")
    record.labels = [Label(key="cost_est_usd", value="0.125"), Label(key="cost_est_usd", value="oops")]
    assert run_cost(record) is None, "the latest label wins, and it does not parse"
    record.labels.reverse()
    assert run_cost(record) == 0.125
