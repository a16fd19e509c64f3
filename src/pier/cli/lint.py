"""`pier validate`: lint runbooks without Docker. Every error and warning of a
runbook in one pass, each at file:line:column when it has a place."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from pier.agents.providers import setting_names
from pier.checks.model import InvalidCheck
from pier.checks.platform import compile_code_checks, lenient_config
from pier.errors import InputError, PierError, Problems, RunbookError
from pier.lifecycle.plan import RunPlan
from pier.lifecycle.request import RunRequest, preflight
from pier.lifecycle.sandbox_env import wanted_names
from pier.runbook import RUNBOOK_FILENAME, Runbook, load, parse
from pier.runbook.parse import key_position, split
from pier.runbook.sections import code_checks
from pier.settings import get_settings
from pier.tasks import ResolvedStep, resolve, task_from_runbook
from pier.tasks.model import Task

_UNKNOWN_KEY = re.compile(r"^unknown frontmatter key '([^']+)'")
_CHECK = re.compile(r"^checks\[(\d+)\]")
_CHECK_FIELD = re.compile(r"^checks\[(\d+)\]\.(\w+): ")


@dataclass(frozen=True)
class Finding:
    message: str
    line: int | None = None
    column: int | None = None


@dataclass
class Report:
    path: Path
    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    frontmatter: str = ""

    def place(self, exc: InputError) -> Finding:
        """The error at its line (a RunbookError's, the line it names) or at its
        frontmatter key."""
        message = exc.message if isinstance(exc, RunbookError) else str(exc)
        if exc.line is not None:
            return Finding(message, exc.line, exc.column)
        item = _CHECK.match(message)
        key = f"checks.{item.group(1)}" if item and exc.key in (None, "checks") else exc.key
        if key:
            return Finding(message, *key_position(self.frontmatter, key.split("."), 2))
        return Finding(message)

    def warn(self, message: str, key: str | None = None) -> None:
        unknown = _UNKNOWN_KEY.match(message)
        key = unknown.group(1) if unknown else key
        field = _CHECK_FIELD.match(message)
        line, column = key_position(self.frontmatter, [key], 2) if key else (None, None)
        if field:
            line, column = key_position(self.frontmatter, ["checks", field.group(1), field.group(2)], 2)
        self.warnings.append(Finding(message, line, column))


def find_runbooks(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.rglob(RUNBOOK_FILENAME)))
        else:
            found.append(path)
    return found


def problems_of(exc: InputError) -> tuple[InputError, ...]:
    return exc.problems if isinstance(exc, Problems) else (exc,)


def validate_one(path: Path) -> Report:
    """The runbook's problems by the rules `pier run` applies before any sandbox
    exists (the same preflight), so what validate passes, run does not refuse.
    Variables a run would give are left open: a missing value is a warning."""
    report = Report(path)
    if path.suffix == ".json":
        return validate_workflow(path, report)
    with contextlib.suppress(OSError, UnicodeDecodeError, PierError):
        report.frontmatter = split(path.read_text(encoding="utf-8"))[0] or "" if path.is_file() else ""
    runbook = None
    try:
        runbook = _loaded(path, report)
        task = task_from_runbook(runbook, get_settings().default_snapshot)
        step = resolve(task)
        plan = _preflight(task, step, path, report)
    except InputError as exc:
        report.errors.extend(report.place(problem) for problem in problems_of(exc))
        _bad_headings(runbook, path, report)
        for warning in runbook.warnings if runbook else ():
            report.warn(warning)
        return report
    except PierError as exc:
        report.errors.append(Finding(str(exc)))
        return report
    _bad_headings(runbook, path, report)
    if plan is not None:
        _code_checks(plan, path, report)
        for warning in plan.warnings:
            if not _CHECK_WARNING.match(warning):
                report.warn(warning)
        _source_warnings(plan, report)
        look_up_image(plan, report)
    return report


def validate_workflow(path: Path, report: Report) -> Report:
    """A workflow's JSON (a task, or the platform's `{name, workflow}` file):
    its steps, activities, parameters and paths, as a server checks them when
    the task is stored (docs/workflows.md); then what a run of it with the
    task's own init_params and this machine's keys would be refused for, as
    warnings (a run brings its own)."""
    import json

    from pydantic import ValidationError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        report.errors.append(Finding(f"cannot read it: {exc}"))
        return report
    except ValueError as exc:
        report.errors.append(Finding(f"not JSON: {exc}"))
        return report
    if isinstance(data, dict) and isinstance(data.get("workflow"), dict):
        data = data["workflow"]
    try:
        task = Task.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            message = str(error.get("msg", "")).removeprefix("Value error, ")
            loc = ".".join(str(p) for p in error.get("loc", ()))
            for part in message.split("; "):
                report.errors.append(Finding(f"{loc}: {part}" if loc else part))
        return report
    if not task.is_workflow:
        report.errors.append(Finding("a runbook task: validate its RUNBOOK.md instead"))
        return report
    from pier.lifecycle.workflow import preflight_workflow

    try:
        from pier.agents.upstreams import Upstreams

        preflight_workflow(task, {}, dict(os.environ), Upstreams.of(get_settings(), "validate"))
    except InputError as exc:
        for problem in problems_of(exc):
            report.warn(
                f"a run with the task's own init_params and this machine's keys would be refused: {problem}"
            )
    return report


def look_up_image(plan: RunPlan, report: Report) -> None:
    """The image a run of it would start from, looked up as `pier run` would
    find it: on this machine's engine, else in its registry (the engine asks,
    as a pull would). One that is in neither is an error; one that could not be
    looked up (no engine, a registry that does not answer) a warning saying so.
    Only an image the run uses: a snapshot comes first, a build has no image."""
    if not plan.image or plan.snapshot:
        return
    from pier.lifecycle.wiring import Services

    ref = plan.image
    try:
        backend = Services().backend
        if backend.image_exists(ref):
            return
    except PierError as exc:
        report.warn(f"image {ref} could not be looked up: {exc}; whether it exists is not known until a run")
        return
    if not get_settings().image_lookup_registry:
        report.warn(
            f"image {ref} is not on this machine, and its registry was not asked (PIER_IMAGE_LOOKUP_REGISTRY "
            "is false): whether it exists is not known until a run pulls it"
        )
        return
    try:
        found = backend.registry_has(ref)
    except PierError as exc:
        report.warn(
            f"image {ref} is not on this machine, and {exc}: whether it exists is not known until a run "
            "pulls it"
        )
        return
    if found is None:
        report.warn(f"image {ref} is not on this machine, and this sandbox backend cannot ask its registry")
    elif not found:
        report.errors.append(
            Finding(
                f"image {ref} does not exist: this machine's engine does not have it and its registry has "
                "no such image or tag; fix the name or the tag, or build it (docker build -t "
                f"{ref} .)",
                *key_position(report.frontmatter, ["image"], 2),
            )
        )


_CHECK_WARNING = re.compile(r"^check (\S+): ")


def _code_checks(plan: RunPlan, path: Path, report: Report) -> None:
    """The `## Code Checks` headings pier cannot run, each at its line, and what
    strict evaluation will make of the agent's checks on an agent that runs no model."""
    offset = _body_offset(path)
    for check in plan.checks:
        where = plan.check_lines.get(check.name)
        line, column = (where[0] + offset, where[1]) if where else (None, None)
        if plan.strict_evaluation and not check.runs_here and plan.agent == "script":
            report.warnings.append(
                Finding(
                    f"check {check.name} is the agent's, and the script agent runs only the runbook's bash "
                    "blocks: with strict_evaluation it is an error (failing the run) unless a step writes its "
                    "entry in validation_report.json",
                    line,
                    column,
                )
            )
    for warning in [w for w in plan.warnings if _CHECK_WARNING.match(w)]:
        name = _CHECK_WARNING.match(warning).group(1)  # type: ignore[union-attr]
        where = plan.check_lines.get(name)
        report.warnings.append(
            Finding(warning, where[0] + offset if where else None, where[1] if where else None)
        )


def _bad_headings(runbook: Runbook | None, path: Path, report: Report) -> None:
    """Each `## Code Checks` heading pier cannot make a check of, at its line: read
    from the file as written, so it is reported even when the plan is refused."""
    if runbook is None:
        return
    offset = _body_offset(path)
    config = lenient_config(runbook.frontmatter.code_checks)
    compiled = compile_code_checks(code_checks(runbook.body), config)
    for check in compiled.checks:
        if isinstance(check, InvalidCheck):
            line, column = compiled.lines[check.name]
            report.errors.append(
                Finding(f"## Code Checks: check {check.name}: {check.problem}", line + offset, column)
            )


def _body_offset(path: Path) -> int:
    """How many lines of the file come before its body (the frontmatter's)."""
    try:
        text = path.read_text(encoding="utf-8").lstrip("\ufeff")
        body = split(text)[1]
    except (OSError, UnicodeDecodeError, PierError):
        return 0
    return text[: len(text) - len(body)].count("\n")


def _source_warnings(plan: RunPlan, report: Report) -> None:
    """What the run's sandbox source would warn about (an unknown snapshot, packages
    a snapshot or image ignores), at the key that causes it; reading the snapshots
    file is the only work (nothing is built)."""
    from pier.sandbox.snapshots import SnapshotCatalog
    from pier.sandbox.source import source_notes

    try:
        catalog = SnapshotCatalog(get_settings())
    except InputError as exc:
        report.warn(f"the snapshots pier knows cannot be read: {exc}")
        return
    notes = source_notes(
        snapshot=plan.snapshot, image=plan.image, base_image=plan.base_image,
        apt_packages=plan.apt_packages, pip_packages=plan.pip_packages, catalog=catalog,
    )  # fmt: skip
    for note in notes:
        key = "snapshot" if note.startswith("snapshot ") and "not found" in note else None
        if key is None:
            key = next(
                (k for k in ("apt_packages", "pip_packages", "base_image") if note.startswith(k)), None
            )
        report.warn(note, key)


def _loaded(path: Path, report: Report) -> Runbook:
    """The runbook; when frontmatter keys are bad, they are reported and the rest
    of the runbook is checked without them (their lines blanked, so every other
    line keeps its number)."""
    try:
        return load(path)
    except Problems as exc:
        bad = [p for p in exc.problems if isinstance(p, RunbookError) and p.line is not None]
        if len(bad) != len(exc.problems):
            raise
    except RunbookError as exc:
        if exc.line is None or not exc.message.startswith("frontmatter key"):
            raise
        bad = [exc]
    report.errors.extend(report.place(problem) for problem in bad)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for problem in bad:
        _blank_key(lines, (problem.line or 1) - 1)
    return parse("".join(lines), path=str(path))


def _blank_key(lines: list[str], index: int) -> None:
    """Comment out the top-level key on lines[index] and its indented value."""
    end = index + 1
    while end < len(lines) and lines[end][:1] in (" ", "\t", "-") and not lines[end].startswith("---"):
        end += 1
    for at in range(index, end):
        lines[at] = "# (checked by pier validate)\n"


def _preflight(task: Task, step: ResolvedStep, path: Path, report: Report) -> RunPlan | None:
    """preflight as `pier run` would. First with placeholder values for the keys
    and secrets the run may get: what it refuses then is the runbook's error.
    Then with what this machine has: a refusal there is about this machine, not
    the runbook, so a warning."""
    settings = get_settings()
    settings_only = setting_names()  # endpoints and the region: a placeholder is none
    placeholders = {
        name: "placeholder-for-validate" for name in wanted_names(step) if name not in settings_only
    }
    plan = preflight(_request(task, path, placeholders), settings)  # raises the runbook's own errors
    here = {k: os.environ[k] for k in wanted_names(step) if k in os.environ}
    try:
        preflight(_request(task, path, here), settings)
    except InputError as exc:
        for problem in problems_of(exc):
            report.warn(f"`pier run` here would refuse it until the environment has what it needs: {problem}")
    return plan


def _request(task: Task, path: Path, env: dict[str, str]) -> RunRequest:
    return RunRequest(
        collection="validate",
        task_name="runbook",
        task=task,
        run_params={"allow_unfilled_vars": True},  # the values come with each run
        env=env,
        resolve_file=Path,
        source_dir=path.parent,
    )


def _line(path: Path, level: str, colour: str, finding: Finding) -> str:
    where = str(path)
    if finding.line is not None:
        where += f":{finding.line}" + (f":{finding.column}" if finding.column is not None else "")
    return f"    {escape(where)}: [{colour}]{level}:[/{colour}] {escape(finding.message)}"


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
            console.print(_line(path, "error", "red", error), highlight=False)
        for warning in report.warnings:
            console.print(_line(path, "warning", "yellow", warning), highlight=False)
    console.print(f"{len(runbooks)} runbook(s), {failed} with errors")
    return failed
