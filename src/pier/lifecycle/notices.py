"""What the engine changed about a run's limits (fewer CPUs than asked, a disk
limit it cannot enforce), said as a warning only when it tells someone something:
when the run asked for that value itself, or the first time on this machine.
Otherwise every run on a small machine would warn about the defaults."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pier.lifecycle.context import RunContext
from pier.tasks.resolve import resolve

NOTICES_DIR = "notices"  # under PIER_HOME: one empty file per note already shown


def report_limit_notes(ctx: RunContext, notes: tuple[str, ...]) -> None:
    """Each note as a warning (log and record) when asked for or new here; else a
    plain log line, so the run's log still says what the sandbox really has."""
    asked = _asked_limits(ctx)
    for note in notes:
        limit = limit_of(note)
        if limit is None or limit in asked:  # a note about anything else is always said
            _warn(ctx, note)
        elif first_on_this_machine(ctx.settings.home, note):
            _warn(ctx, f"{note} (said once on this machine; set the value explicitly to hear it every run)")
        else:
            ctx.log(note)


def limit_of(note: str) -> str | None:
    """Which default limit a backend's note is about ("cpus 4 lowered to 2: ...",
    "disk limit 10G not enforced: ...", "4096 processes not enforced: ..."), if any."""
    words = note.lower()
    for limit, word in (("cpus", "cpu"), ("disk", "disk"), ("pids", "process")):
        if word in words:
            return limit
    return None


def _warn(ctx: RunContext, note: str) -> None:
    ctx.log(f"warning: {note}")
    ctx.record.outputs.warnings.append(note)


def _asked_limits(ctx: RunContext) -> set[str]:
    """The limits this run, or the operator's settings, chose rather than defaulted."""
    asked = set()
    if (
        resolve(ctx.task, dict(ctx.run_params)).cpus is not None
        or "default_cpus" in ctx.settings.model_fields_set
    ):
        asked.add("cpus")
    if "disk_limit" in ctx.settings.model_fields_set:
        asked.add("disk")
    if "pids_limit" in ctx.settings.model_fields_set:
        asked.add("pids")
    return asked


def first_on_this_machine(home: Path, note: str) -> bool:
    """True the first time this note is seen under PIER_HOME (then remembered)."""
    marker = home / NOTICES_DIR / hashlib.sha256(note.encode()).hexdigest()[:16]
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        with open(marker, "x"):
            return True
    except FileExistsError:
        return False
    except OSError:
        return True  # cannot remember: saying it again is the safe side
