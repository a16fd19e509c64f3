"""The checks and the runbook's own verdict, as `pier run` prints them."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pier.record import CheckResult, RunRecord

DETAIL_CHARS = 80


def show_checks(record: RunRecord, console: Console) -> None:
    if record.checks:
        console.print(checks_table(record.checks))
    if record.eval:
        summary = record.eval
        console.print(
            f"  validation_report.json: verdict {summary.get('verdict') or '-'}, "
            f"stages {summary.get('checks')} passed",
            highlight=False,
        )


def checks_table(checks: list[CheckResult]) -> Table:
    table = Table("check", "type", "result", "exit", "time", "detail", title="checks", title_justify="left")
    for check in checks:
        result = "[green]passed[/green]" if check.passed else "[red]failed[/red]"
        exit_code = "-" if check.exit_code is None else str(check.exit_code)
        table.add_row(
            escape(check.name),
            check.type,
            result,
            exit_code,
            f"{check.duration_s:.1f}s",
            escape(_detail(check)),
        )
    return table


def _detail(check: CheckResult) -> str:
    """The output's last line: the verdict of most test runners and of pier's program."""
    lines = [line for line in check.output.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    return last if len(last) <= DETAIL_CHARS else last[: DETAIL_CHARS - 1] + "…"
