"""The runbooks' own self-check: real runbooks write results/validation_report.json
with `overall_passed` and a list of `stages` ({name, passed, message}), some a
`verdict` (top level or under `results`). pier summarises it as the run's
`eval`; it never changes `success` (declared checks do that)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPORT_NAME = "validation_report.json"
MAX_REPORT_BYTES = 10 << 20
_PASSING_WORDS = frozenset({"pass", "passed", "ok", "success", "succeeded", "true"})


class ReportError(ValueError):
    """The report exists but cannot be summarised; the message says why."""


def eval_summary(results_dir: Path) -> dict[str, Any] | None:
    """{overall_passed, verdict, checks: "passed/total"}, or None when the results
    hold no report. Raises ReportError."""
    path = results_dir / REPORT_NAME
    if not path.is_file():
        return None
    if path.stat().st_size > MAX_REPORT_BYTES:
        raise ReportError(f"{REPORT_NAME} is larger than {MAX_REPORT_BYTES >> 20} MB; not read")
    try:
        report = json.loads(path.read_text(encoding="utf-8-sig"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReportError(f"{REPORT_NAME} is not valid JSON: {exc}") from None
    if not isinstance(report, dict):
        raise ReportError(f"{REPORT_NAME} is not a JSON object")
    return summarise(report)


def summarise(report: dict[str, Any]) -> dict[str, Any]:
    overall = report.get("overall_passed")
    overall = overall if isinstance(overall, bool) else None
    passed, total = _stage_counts(report.get("stages"))
    return {"overall_passed": overall, "verdict": _verdict(report, overall), "checks": f"{passed}/{total}"}


def _verdict(report: dict[str, Any], overall: bool | None) -> str | None:
    results = report.get("results")
    for candidate in (report.get("verdict"), results.get("verdict") if isinstance(results, dict) else None):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip().upper()
    if overall is None:
        return None
    return "PASS" if overall else "FAIL"


def _stage_counts(stages: Any) -> tuple[int, int]:
    if isinstance(stages, dict):  # {name: {...}} or {name: true}
        stages = list(stages.values())
    if not isinstance(stages, list):
        return 0, 0
    return sum(_stage_passed(stage) for stage in stages), len(stages)


def _stage_passed(stage: Any) -> bool:
    if isinstance(stage, bool):
        return stage
    if not isinstance(stage, dict):
        return False
    if isinstance(stage.get("passed"), bool):
        return stage["passed"]
    status = stage.get("status", stage.get("result"))
    return isinstance(status, str) and status.strip().lower() in _PASSING_WORDS
