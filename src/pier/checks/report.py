"""The runbooks' own self-check, results/validation_report.json.

A v1 report (`overall_passed`, a list of `stages` ({name, passed, message}),
some a `verdict`, top level or under `results`) is summarised as the run's
`eval` and never changes `success`. When the runbook declares checks (either
form) or the agent wrote the platform's v2 report (`version: 2`, typed
`checks[]` entries), pier merges its check results into it (`merge_report`),
writes the merged report back, and `success` follows its verdict."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from pier.checks.model import Check, program_spec
from pier.record import CheckResult

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


# --- The evaluation report v2 (the platform's; docs/runs.md) ---------------------

STATUSES = ("pass", "fail", "skipped", "error")
KINDS = ("step", "code_check", "checklist", "judge")
STDOUT_TAIL_CHARS = 2000
DEFAULT_PASS_THRESHOLD = 4.0


def read_report(results_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the agent's report, None), (None, None) when there is none, or (None, why
    it cannot be read)."""
    try:
        path = results_dir / REPORT_NAME
        if not path.is_file():
            return None, None
        if path.stat().st_size > MAX_REPORT_BYTES:
            return None, f"{REPORT_NAME} is larger than {MAX_REPORT_BYTES >> 20} MB; not read"
        report = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return None, f"{REPORT_NAME} is not valid JSON ({exc}): pier wrote its own entries in its place"
    if not isinstance(report, dict):
        return None, f"{REPORT_NAME} is not a JSON object: pier wrote its own entries in its place"
    return report, None


def is_v2(report: dict[str, Any] | None) -> bool:
    return isinstance(report, dict) and str(report.get("version")) == "2"


@dataclass
class Merged:
    report: dict[str, Any]
    results: list[CheckResult]  # one per check, in the runbook's order
    notes: list[str] = field(default_factory=list)  # what pier changed in the agent's report

    @property
    def passed(self) -> bool:
        return self.report["overall_passed"]

    def summary(self) -> dict[str, Any]:
        """The record's `eval`: the v1 keys (overall_passed, verdict, checks) and v2's."""
        entries = self.report["checks"]
        counts = {status: sum(e.get("status") == status for e in entries) for status in STATUSES}
        failed = [f"{e.get('kind')}:{e.get('id')}" for e in entries if e.get("status") in ("fail", "error")]
        summary: dict[str, Any] = {
            "overall_passed": self.passed,
            "verdict": "PASS" if self.passed else "FAIL",
            "checks": f"{counts['pass']}/{len(entries)}",
            "version": 2,
            "passed": self.passed,
            "counts": counts,
            "failed": failed,
            "report": REPORT_NAME,
        }
        for key in ("overall_score", "pass_threshold"):
            if key in self.report:
                summary[key] = self.report[key]
        return summary


def merge_report(
    agent: dict[str, Any] | None,
    checks: Sequence[Check],
    ran: Sequence[CheckResult],
    *,
    strict: bool = False,
    evaluation: str | None = None,
) -> Merged:
    """The agent's report with pier's entries merged in, the platform's way: pier's
    entry for each check it ran replaces any the agent wrote; a `code_check` entry
    for an id pier does not expect is dropped; a check the agent should have run
    and did not report is `skipped` (`error` when strict); the verdict is computed
    from the merged `checks`, the agent's own `verdict` kept as a hint."""
    report = dict(agent or {})
    notes: list[str] = []
    by_name = {result.name: result for result in ran}
    mine = {check.name: check for check in checks if check.runs_here}
    theirs = {check.name: check for check in checks if not check.runs_here}
    reported: dict[str, dict[str, Any]] = {}
    kept: list[dict[str, Any]] = []
    raw = report.get("checks")
    if raw is not None and not isinstance(raw, list):
        notes.append(f"{REPORT_NAME}: `checks` is not a list; the agent's entries were not read")
        raw = []
    for entry in raw or []:
        if not isinstance(entry, dict):
            notes.append(f"{REPORT_NAME}: an entry of `checks` is not an object; dropped")
            continue
        entry = _normalised(entry, notes)
        if entry.get("kind") != "code_check":
            kept.append(entry)
            continue
        ident = str(entry.get("id"))
        if ident in mine:
            notes.append(
                f"{REPORT_NAME}: the agent's entry for check {ident} was replaced by pier's (pier runs it)"
            )
        elif ident not in theirs:
            notes.append(f"{REPORT_NAME}: the agent's entry for check {ident} was dropped (no such check)")
        elif ident in reported:
            notes.append(f"{REPORT_NAME}: the agent reported check {ident} twice; the first entry stands")
        else:
            reported[ident] = entry
    results: list[CheckResult] = []
    entries = list(kept)
    for check in checks:
        if check.name in mine:
            result = by_name.get(check.name)
            if result is None:  # not reached: the run was stopped first
                result = _unreported(
                    check, "error", "the check did not run (the run was stopped first)", "jetty"
                )
            entries.append(jetty_entry(check, result))
        elif check.name in reported:
            result = _from_agent(check, reported[check.name])
            entries.append(
                {**reported[check.name], "details": {**_details(reported[check.name]), "runner": "agent"}}
            )
        else:
            status = "error" if strict else "skipped"
            why = "the agent did not report this check" + (" (strict_evaluation)" if strict else "")
            result = _unreported(check, status, why, "agent")
            entries.append(_entry(check, status, why, {"runner": "agent"}))
        results.append(result)
    passed = not any(e.get("status") in ("fail", "error") for e in entries)
    hint = report.get("verdict")
    report.update(version=2, checks=entries, verdict="pass" if passed else "fail", overall_passed=passed)
    if hint is not None:
        report["agent_verdict"] = hint
    _mirrors(report, entries, evaluation)
    return Merged(report, results, notes)


def jetty_entry(check: Check, result: CheckResult) -> dict[str, Any]:
    details: dict[str, Any] = {
        "runner": "jetty",
        "type": check.type,
        "command": _command_of(check),
        "exit_code": result.exit_code,
        "stdout_tail": result.output[-STDOUT_TAIL_CHARS:],
        "duration_s": result.duration_s,
    }
    return _entry(check, result.outcome, result.message or "", details)


def _entry(check: Check, status: str, message: str, details: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "code_check", "id": check.name, "name": check.title or check.name,
            "status": status, "message": message, "details": details}  # fmt: skip


def _command_of(check: Check) -> str:
    run = getattr(check, "run", None)
    if isinstance(run, str):
        return run
    if check.type == "invalid":
        return ""
    spec = program_spec(check)
    return "use: " + " ".join(
        f"{k}={json.dumps(v)}" for k, v in {"": spec.pop("type"), **spec}.items()
    ).lstrip("= ")


def _normalised(entry: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The entry with a status pier can count: a judge's from its score and
    threshold; a status that is not one of the four counts as `error`."""
    entry = dict(entry)
    score, threshold = entry.get("score"), entry.get("threshold")
    if entry.get("kind") == "judge" and _number(score) and _number(threshold):
        status = "pass" if score >= threshold else "fail"
        if entry.get("status") != status:
            notes.append(
                f"{REPORT_NAME}: judge {entry.get('id')} scored {score} against {threshold}: {status}"
            )
        entry["status"] = status
    if entry.get("status") not in STATUSES:
        notes.append(
            f"{REPORT_NAME}: entry {entry.get('kind')}:{entry.get('id')} has status {entry.get('status')!r}, "
            f"not one of {', '.join(STATUSES)}: counted as error"
        )
        entry["status"] = "error"
    return entry


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _details(entry: dict[str, Any]) -> dict[str, Any]:
    details = entry.get("details")
    return dict(details) if isinstance(details, dict) else {}


def _from_agent(check: Check, entry: dict[str, Any]) -> CheckResult:
    details = _details(entry)
    exit_code = details.get("exit_code")
    message = entry.get("message")
    return CheckResult(
        name=check.name,
        type=check.type,
        passed=entry["status"] == "pass",
        exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
        output=str(details.get("stdout_tail") or message or ""),
        status=entry["status"],
        runner="agent",
        title=check.title,
        message=str(message) if message is not None else None,
    )


def _unreported(check: Check, status: str, why: str, runner: str) -> CheckResult:
    return CheckResult(name=check.name, type=check.type, passed=status == "pass", output=why,
                       status=status, runner=runner, title=check.title, message=why)  # fmt: skip


def _mirrors(report: dict[str, Any], entries: list[dict[str, Any]], evaluation: str | None) -> None:
    """The v1 keys the agent left out, derived from `checks` as the platform says."""
    if not isinstance(report.get("stages"), list | dict):
        report["stages"] = [
            {"name": e.get("id"), "passed": e.get("status") == "pass", "message": e.get("message", "")}
            for e in entries if e.get("kind") == "step"
        ]  # fmt: skip
    report.setdefault("results", {"pass": 0, "partial": 0, "fail": 0})
    judges = [e for e in entries if e.get("kind") == "judge" and _number(e.get("score"))]
    if not isinstance(report.get("rubric_scores"), dict):
        report["rubric_scores"] = {
            str(e.get("id")): {"score": e["score"], "notes": e.get("message", "")} for e in judges
        }
    if evaluation == "rubric" or judges:
        if judges and not _number(report.get("overall_score")):
            report["overall_score"] = round(sum(e["score"] for e in judges) / len(judges), 3)
        report.setdefault("pass_threshold", DEFAULT_PASS_THRESHOLD)
