"""What `pier run` prints of a run's outcome and of a refused input, shared by
the local run (pier.cli.run) and `pier run --remote` (pier.cli.remote), below both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pier.cli.console import out, terminal_safe

if TYPE_CHECKING:
    from pydantic import ValidationError

    from pier.record import Trajectory

__all__ = ["SUMMARY_FILES", "record_json", "show_results", "show_summary", "validation_message"]


# The option of `pier run` that sets each field a run's limits are validated on.
_OPTIONS = {
    "timeout_sec": "--timeout",
    "cpus": "--cpus",
    "memory": "--memory",
    "network_enabled": "--no-network",
}


def validation_message(exc: ValidationError) -> str:
    """A pydantic refusal as one line per problem, each naming what the user set:
    the option of `pier run`, the PIER_* variable, or else the field."""
    problems = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        if exc.title == "Settings" and loc:
            where = f"PIER_{loc[0].upper()}"
        else:
            where = next((_OPTIONS[part] for part in reversed(loc) if part in _OPTIONS), ".".join(loc))
        message = str(error["msg"]).removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)


def record_json(record: Trajectory, *, raw: bool = False, indent: int | None = None) -> str:
    """A run record as `pier run --json` and `pier runs --json` print it: the
    fields people reach for first (`jq -r .id`), then the platform's whole
    trajectory record; with `raw`, only the trajectory, exactly as the API serves it."""
    import json

    if raw:
        return record.model_dump_json(indent=indent)
    head = {
        "id": record.trajectory_id,
        "status": record.status.value,
        "success": record.success,
        "collection": record.collection,
        "task": record.task,
        "created": record.created.isoformat().replace("+00:00", "Z"),
        "duration_seconds": record.duration_seconds,
    }
    # head's keys first; the values the trajectory has for the same keys are its own
    return json.dumps({**head, **record.model_dump(mode="json")}, indent=indent, ensure_ascii=False)


def show_summary(record: Trajectory, folder: str) -> None:
    from pier.cli.checks import show_checks
    from pier.lifecycle.outcomes import DESCRIPTIONS, Outcome, outcome_of

    colour = "green" if record.success else "red"
    found = outcome_of(record)
    how = f" ({DESCRIPTIONS[found]})" if found not in (None, Outcome.success, Outcome.cancelled) else ""
    out.print(
        f"[{colour}]{record.status.value}[/{colour}] run {record.trajectory_id} "
        f"in {record.duration_seconds or 0:.1f}s{how}",
        highlight=False,
    )
    state = record.state  # the words the web UI and the API use too (pier.record.run_state)
    if record.error:
        out.print(f"  [red]{terminal_safe(state.summary)}[/red]", highlight=False)
    show_results(record)
    show_checks(record, out)
    if not record.outputs.checks:
        out.print(f"  {state.checks}", highlight=False)
    out.print(f"  outputs: {folder}", highlight=False)


SUMMARY_FILES = 10  # result files listed by name; the rest are counted


def show_results(record: Trajectory) -> None:
    """The first result files (primary outputs first), then how many more and their
    size: a run that made 2,000 files must not bury its outcome under them."""
    outputs = record.outputs
    shown, rest = outputs.results_files[:SUMMARY_FILES], outputs.results_files[SUMMARY_FILES:]
    for item in shown:
        star = "★" if item.path in outputs.primary_files else " "
        out.print(f"  {star} {item.path}  ({item.size} bytes)", highlight=False)
    if rest:
        from rich import filesize

        total = filesize.decimal(sum(item.size for item in outputs.results_files))
        out.print(
            f"    ... and {len(rest)} more ({filesize.decimal(sum(item.size for item in rest))}; "
            f"{len(outputs.results_files)} files, {total} in all)",
            highlight=False,
        )
