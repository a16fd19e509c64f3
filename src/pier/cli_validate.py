"""`pier validate`: lint runbooks without Docker."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from pier.errors import InputError, PierError
from pier.lifecycle.plan import RunPlan
from pier.lifecycle.request import RunRequest, preflight
from pier.lifecycle.sandbox_env import wanted_names
from pier.runbook import RUNBOOK_FILENAME, load
from pier.settings import get_settings
from pier.tasks import ResolvedStep, resolve, task_from_runbook
from pier.tasks.model import Task


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
    """The runbook's problems by the rules `pier run` applies before any sandbox
    exists (the same preflight), so what validate passes, run does not refuse."""
    report = Report(path)
    try:
        runbook = load(path)
        task = task_from_runbook(runbook, get_settings().default_snapshot)
        step = resolve(task)
        plan = _preflight(task, step, path, report)
    except PierError as exc:
        report.errors.append(str(exc))
        return report
    report.warnings.extend(plan.warnings)
    return report


def _preflight(task: Task, step: ResolvedStep, path: Path, report: Report) -> RunPlan:
    """preflight with the keys and secrets this machine has, as `pier run` would.
    A refusal that placeholder values for them would lift is about this machine,
    not the runbook: a warning; any other refusal is the runbook's error."""
    settings = get_settings()
    try:
        return preflight(
            _request(task, path, {k: os.environ[k] for k in wanted_names(step) if k in os.environ}), settings
        )
    except InputError as exc:
        here = exc
    placeholders = {name: "placeholder-for-validate" for name in wanted_names(step)}
    plan = preflight(_request(task, path, placeholders), settings)  # raises the runbook's own error
    report.warnings.append(f"`pier run` here would refuse it until the environment has what it needs: {here}")
    return plan


def _request(task: Task, path: Path, env: dict[str, str]) -> RunRequest:
    return RunRequest(
        collection="validate",
        task_name="runbook",
        task=task,
        env=env,
        resolve_file=Path,
        source_dir=path.parent,
    )


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
