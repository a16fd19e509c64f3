"""The checks and the runbook's own verdict, as `pier run` prints them."""

from __future__ import annotations

import re

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pier.record import CheckResult, Trajectory

DETAIL_CHARS = 80
FAILED_TAIL_LINES = 8


def show_checks(record: Trajectory, console: Console) -> None:
    checks = record.outputs.checks
    if checks:
        console.print(checks_table(checks, console.width))
    for check in (c for c in checks if c.failing):
        tail = check.output.rstrip().splitlines()[-FAILED_TAIL_LINES:]
        console.print(
            f"  [red]{escape(check.name)}[/red] output (last lines; all in run.json):", highlight=False
        )
        for line in tail:
            console.print(f"    {line}", highlight=False, markup=False)
    if record.outputs.eval:
        summary = record.outputs.eval
        what = "entries" if summary.get("version") == 2 else "stages"
        merged = " (merged with pier's checks)" if summary.get("version") == 2 else ""
        console.print(
            f"  validation_report.json{merged}: verdict {summary.get('verdict') or '-'}, "
            f"{what} {summary.get('checks')} passed",
            highlight=False,
        )
        for failed in summary.get("failed") or ():
            console.print(f"    failed: {escape(str(failed))}", highlight=False)


def checks_table(checks: list[CheckResult], width: int = 120) -> Table:
    colours = {"pass": "green", "fail": "red", "error": "red", "skipped": "yellow"}
    words = {"pass": "passed", "fail": "failed", "error": "error", "skipped": "skipped"}
    rows = [
        (
            escape(check.name),
            check.type,
            check.runner,
            f"[{colours[check.outcome]}]{words[check.outcome]}[/{colours[check.outcome]}]",
            "-" if check.exit_code is None else str(check.exit_code),
            f"{check.duration_s:.1f}s",
            escape(_detail(check)),
        )
        for check in checks
    ]
    table = Table(title="checks", title_justify="left")
    used = 1  # the left border; each column adds its padding and a border
    for index, column in enumerate(("check", "kind", "runner", "status", "exit", "time")):
        size = max(len(column), *(len(Text.from_markup(row[index])) for row in rows))
        table.add_column(column, no_wrap=True, min_width=size)
        used += size + 3
    # Only the detail gives way on a narrow terminal.
    table.add_column("detail", no_wrap=True, overflow="ellipsis", max_width=max(width - used - 3, 10))
    for row in rows:
        table.add_row(*row)
    return table


def _detail(check: CheckResult) -> str:
    """The output's last line: the verdict of most test runners and of pier's program
    (whose passed:/failed: the result column already says)."""
    lines = [line for line in check.output.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else ""
    last = re.sub(r"^(passed|failed|error): ", "", last)
    return last if len(last) <= DETAIL_CHARS else last[: DETAIL_CHARS - 1] + "…"
