"""An experiment's runs as rows: one per try (cell, attempt, retry, success,
score, cost, tokens, duration, error), for CSV and JSONL."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pier.db import StoredAttempt
from pier.experiments.results import cost, outcome, score, tokens, verdict
from pier.experiments.spec import Cell
from pier.lifecycle.outcomes import outcome_of
from pier.record import Trajectory

COLUMNS = (
    "experiment", "cell", "cell_key", "agent", "model", "provider", "row", "attempt", "retry",
    "trajectory_id", "status", "outcome", "run_outcome", "success", "score", "verdict", "cost_usd", "tokens",
    "duration_seconds", "failed_stage", "error",
)  # fmt: skip


def rows(experiment_id: str, cells: Sequence[Cell],
         tries: Iterable[tuple[StoredAttempt, Trajectory | None]]) -> Iterator[dict[str, Any]]:  # fmt: skip
    for attempt, record in tries:
        cell = cells[attempt.cell]
        yield {
            "experiment": experiment_id, "cell": cell.index, "cell_key": cell.key,
            "agent": cell.agent, "model": cell.model, "provider": cell.provider, "row": cell.row,
            "attempt": attempt.attempt, "retry": attempt.retry, "trajectory_id": attempt.trajectory_id,
            "status": record.status.value if record else "claimed",
            "outcome": outcome(record) if record else None,
            "run_outcome": run_outcome.value if record and (run_outcome := outcome_of(record)) else None,
            "success": record.success if record else None,
            "score": score(record) if record else None,
            "verdict": verdict(record) if record else None,
            "cost_usd": cost(record) if record else None,
            "tokens": tokens(record) if record else 0,
            "duration_seconds": record.duration_seconds if record else None,
            "failed_stage": record.failed_stage if record else None,
            "error": record.error if record else None,
        }  # fmt: skip


def to_csv(found: Iterable[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in found:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def to_jsonl(found: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, sort_keys=False) + "\n" for row in found)
