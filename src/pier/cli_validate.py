"""`pier validate`: lint runbooks without Docker."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from pier.agents import get_agent
from pier.errors import PierError
from pier.lifecycle.plan import RunInputs, build_plan
from pier.runbook import RUNBOOK_FILENAME, load
from pier.settings import get_settings
from pier.tasks import resolve, task_from_runbook


@dataclass
class Report:
    path: Path
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def find_runbooks(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.rglob(RUNBOOK_FILENAME)))
        else:
            found.append(path)
    return found


def validate_one(path: Path) -> Report:
    report = Report(path)
    try:
        runbook = load(path)
        step = resolve(task_from_runbook(runbook))
        inputs = RunInputs(
            uuid.uuid4().hex,
            "validate",
            path.parent.name or "runbook",
            resolve_file=Path,
            source_dir=path.parent,
        )
        plan = build_plan(step, inputs, get_settings())
    except PierError as exc:
        report.errors.append(str(exc))
        return report
    report.warnings.extend(plan.warnings)
    try:
        get_agent(plan.agent)
    except PierError as exc:
        report.warnings.append(str(exc))
    return report


def validate_paths(paths: list[Path], console: Console) -> int:
    """Prints each runbook's problems; returns how many runbooks have errors."""
    runbooks = find_runbooks(paths)
    if not runbooks:
        console.print(f"[red]no {RUNBOOK_FILENAME} found under {', '.join(map(str, paths))}[/red]")
        return 1
    failed = 0
    for path in runbooks:
        report = validate_one(path)
        failed += bool(report.errors)
        mark = (
            "[red]✗[/red]"
            if report.errors
            else ("[yellow]![/yellow]" if report.warnings else "[green]✓[/green]")
        )
        console.print(f"{mark} {escape(str(path))}", highlight=False)
        for error in report.errors:
            console.print(f"    [red]error:[/red] {escape(error)}", highlight=False)
        for warning in report.warnings:
            console.print(f"    [yellow]warning:[/yellow] {escape(warning)}", highlight=False)
    console.print(f"{len(runbooks)} runbook(s), {failed} with errors")
    return failed
