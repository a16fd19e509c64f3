"""An experiment's figures, computed each time from its runs' records (success,
checks, eval verdict, usage and cost, durations, failed stage): the runs are
the one truth, these are views of them, live while the experiment runs.

An attempt counts once: by its last try. Each run's outcome is the record's
(pier.lifecycle.outcomes): the agent's outcomes (it failed, timed out, wrote
nothing, its checks failed, its provider refused it, its budget ran out) are
attempts that count; a try that failed for pier's own reason (the engine,
storage, the database, a lost worker or server) is retried and counted apart
(`infra_failures`), never as the agent's failure; an attempt whose tries all
failed so is left out of the pass rates.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pier.db import StoredAttempt
from pier.experiments import stats
from pier.experiments.spec import Cell
from pier.lifecycle.outcomes import Outcome, outcome_of
from pier.record import Trajectory

SUCCESS, FAILURE, INFRA, CANCELLED = "success", "failure", "infra", "cancelled"
MAX_COMPARED = 8  # values of one axis compared pairwise, at most


def outcome(record: Trajectory) -> str | None:
    """success, failure, infra or cancelled for an ended run; None while it runs."""
    found = outcome_of(record)
    if found is None:
        return None
    if found in (Outcome.infra, Outcome.cancelled):
        return found.value
    return SUCCESS if record.success else FAILURE


def _usage(record: Trajectory) -> dict[str, Any]:
    """A runbook run's usage (its run step's), or a workflow's (its model steps' and children's, summed)."""
    if record.is_workflow:
        return record.usage
    return record.outputs.usage if _has_run(record) else {}


def cost(record: Trajectory) -> float | None:
    value = _usage(record).get("cost_usd")
    return float(value) if isinstance(value, int | float) else None


def tokens(record: Trajectory) -> int:
    usage = _usage(record)
    found = usage.get("total_tokens")
    if isinstance(found, int):
        return found
    return sum(v for k in ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")
               if isinstance(v := usage.get(k), int))  # fmt: skip


def failed_checks(record: Trajectory) -> str:
    """What a run whose checks failed says: the first failing check's name and message."""
    failing = [c for c in record.outputs.checks if not c.passed] if _has_run(record) else []
    if not failing:
        entries = (record.outputs.eval or {}).get("failed") if _has_run(record) else None
        return f"the evaluation failed: {', '.join(map(str, entries))}" if entries else "checks failed"
    first = failing[0]
    text = getattr(first, "message", None) or next(
        (line.strip() for line in reversed(first.output.splitlines()) if line.strip()), ""
    )
    said = f": {text[:200]}" if text else ""
    more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
    return f"check {first.name} failed{said}{more}"


def _has_run(record: Trajectory) -> bool:
    return "run" in record.steps


def score(record: Trajectory) -> float | None:
    """The share of checks that passed (a skipped one, which the agent did not
    report, is not counted); without checks, 1 for a success and 0 otherwise."""
    if not record.status.terminal:
        return None
    checks = [c for c in record.outputs.checks if c.outcome != "skipped"] if _has_run(record) else []
    if checks:
        return sum(c.outcome == "pass" for c in checks) / len(checks)
    return 1.0 if record.success else 0.0


def verdict(record: Trajectory) -> str | None:
    found = record.outputs.eval if _has_run(record) else None
    value = found.get("verdict") if isinstance(found, dict) else None
    return value if isinstance(value, str) else None


@dataclass
class Tally:
    """Counts over a set of attempts (a cell, an axis value, the experiment)."""

    attempts: int = 0  # that ended with an agent outcome (success or failure)
    successes: int = 0
    running: int = 0
    infra_failures: int = 0  # tries that failed for an infrastructure reason
    infra_lost: int = 0  # attempts whose every try did
    cancelled: int = 0
    cost_usd: float = 0.0
    cost_runs: int = 0
    tokens: int = 0
    scores: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    verdicts: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)  # each ended attempt's outcome label
    failures: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (outcome, stage, message)
    per_cell: list[tuple[int, int]] = field(default_factory=list)  # (n, c) of each cell in it

    def add_try(self, record: Trajectory | None, last: bool) -> None:
        if record is None:  # claimed, not yet accepted
            if last:
                self.running += 1
            return
        found = outcome(record)
        spent = cost(record)
        if spent is not None:
            self.cost_usd += spent
            self.cost_runs += 1
        self.tokens += tokens(record)
        if found == INFRA:
            self.infra_failures += 1
        if not last:
            return
        if found is None:
            self.running += 1
        elif found == CANCELLED:
            self.cancelled += 1
        elif found == INFRA:
            self.infra_lost += 1
        else:
            self.attempts += 1
            self.successes += found == SUCCESS
            self._ended(record, found)

    def _ended(self, record: Trajectory, found: str) -> None:
        if (value := score(record)) is not None:
            self.scores.append(value)
        if record.duration_seconds is not None:
            self.durations.append(record.duration_seconds)
        if (said := verdict(record)) is not None:
            self.verdicts[said] += 1
        label = outcome_of(record) or Outcome.agent_failed
        self.outcomes[label.value] += 1
        if found == FAILURE:
            message = (record.error or failed_checks(record)).splitlines()[0][:300]
            self.failures[(label.value, record.failed_stage or "check", message)] += 1

    def merge(self, other: Tally) -> None:
        for name in ("attempts", "successes", "running", "infra_failures", "infra_lost", "cancelled",
                     "cost_usd", "cost_runs", "tokens"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.scores += other.scores
        self.durations += other.durations
        self.verdicts.update(other.verdicts)
        self.outcomes.update(other.outcomes)
        self.failures.update(other.failures)
        self.per_cell += other.per_cell or [(other.attempts, other.successes)]

    def summary(self, max_k: int) -> dict[str, Any]:
        n, c = self.attempts, self.successes
        interval = stats.wilson(c, n)
        cells = self.per_cell or [(n, c)]
        ks = range(1, max_k + 1)
        return {
            "attempts": n,
            "successes": c,
            "running": self.running,
            "pass_rate": round(c / n, 6) if n else None,
            "pass_rate_interval": interval.as_list() if interval else None,
            "pass_at_k": {str(k): _mean_over(cells, k, stats.pass_at_k) for k in ks},
            "pass_hat_k": {str(k): _mean_over(cells, k, stats.pass_hat_k) for k in ks},
            "mean_score": round(sum(self.scores) / len(self.scores), 6) if self.scores else None,
            "verdicts": dict(self.verdicts),
            "cost_usd": round(self.cost_usd, 6),
            "cost_per_run": round(self.cost_usd / self.cost_runs, 6) if self.cost_runs else None,
            "cost_per_success": round(self.cost_usd / c, 6) if c and self.cost_runs else None,
            "tokens": self.tokens,
            "duration_p50": _rounded(stats.percentile(self.durations, 50)),
            "duration_p95": _rounded(stats.percentile(self.durations, 95)),
            "infra_failures": self.infra_failures,
            "infra_lost": self.infra_lost,
            "cancelled": self.cancelled,
            "outcomes": dict(self.outcomes.most_common()),
            "failures": [
                {"outcome": label, "stage": stage, "message": message, "count": count}
                for (label, stage, message), count in self.failures.most_common(10)
            ],
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _mean_over(cells: Sequence[tuple[int, int]], k: int, estimator: Any) -> float | None:
    """The estimator's mean over the cells that have at least k ended attempts
    (as pass@k is averaged over problems); None when none has."""
    values = [estimator(n, c, k) for n, c in cells if n >= k]
    return round(sum(values) / len(values), 6) if values else None


def tallies(
    cells: Sequence[Cell], attempts: Iterable[StoredAttempt], records: Mapping[str, Trajectory]
) -> dict[int, Tally]:
    """One Tally per cell index."""
    by_seq: dict[int, list[StoredAttempt]] = defaultdict(list)
    for attempt in attempts:
        by_seq[attempt.seq].append(attempt)
    found = {cell.index: Tally() for cell in cells}
    for tries in by_seq.values():
        tries.sort(key=lambda a: a.retry)
        for attempt in tries:
            tally = found[attempt.cell]
            tally.add_try(records.get(attempt.trajectory_id), last=attempt is tries[-1])
    return found


def results(
    cells: Sequence[Cell], attempts: Sequence[StoredAttempt], records: Mapping[str, Trajectory], max_k: int
) -> dict[str, Any]:
    """Per cell, per axis value, the whole experiment, and comparisons between the values of each axis."""
    per_cell = tallies(cells, attempts, records)
    total = Tally()
    axes: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    for cell in cells:
        tally = per_cell[cell.index]
        total.merge(tally)
        for axis, value in cell.axes().items():
            axes[axis][value].merge(tally)
    varied = {axis: values for axis, values in axes.items() if len(values) > 1}
    return {
        "total": total.summary(max_k),
        "cells": [{**cell_view(cell), **per_cell[cell.index].summary(max_k)} for cell in cells],
        "axes": {
            axis: {value: tally.summary(max_k) for value, tally in values.items()}
            for axis, values in varied.items()
        },
        "comparisons": comparisons(varied),
    }


def cell_view(cell: Cell) -> dict[str, Any]:
    view: dict[str, Any] = {"cell": cell.index, "key": cell.key, "axes": cell.axes()}
    if (label := cell.row_label()) is not None:
        view["row_label"] = label
    return view


def comparisons(axes: Mapping[str, Mapping[str, Tally]]) -> list[dict[str, Any]]:
    """Each pair of values of an axis: the difference of their pass rates with
    Newcombe's 95% interval; `significant` when the interval leaves out 0."""
    found = []
    for axis, values in axes.items():
        names = list(values)[:MAX_COMPARED]
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                ta, tb = values[a], values[b]
                diff = stats.difference(ta.successes, ta.attempts, tb.successes, tb.attempts)
                if diff is None:
                    continue
                found.append({
                    "axis": axis, "a": a, "b": b,
                    "difference": round(diff.difference, 6),
                    "interval": diff.interval.as_list(),
                    "significant": diff.significant,
                })  # fmt: skip
    return found
