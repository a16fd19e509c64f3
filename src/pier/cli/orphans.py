"""What `pier run`, `runs`, `logs` and `sweep` do first: end the runs whose
`pier` process is gone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pier.cli.console import err
from pier.errors import PierError

if TYPE_CHECKING:
    from pier.lifecycle.start import Services


def end_orphans(services: Services, remove_sandboxes: bool = True) -> None:
    """End the runs whose `pier` process is gone (killed), and remove what they left.
    Every command that looks at runs does this first, so none stays `running` forever."""
    from pier.lifecycle.orphans import end_orphaned_runs

    backend = (lambda: services.backend) if remove_sandboxes else None
    try:
        ended = end_orphaned_runs(services.store, services.settings, backend)
    except PierError as exc:
        err.print(f"[yellow]warning:[/yellow] could not check for abandoned runs: {exc}", highlight=False)
        return
    for record in ended:
        message = record.error or "its process is gone"
        err.print(f"[yellow]ended run {record.trajectory_id}:[/yellow] {message}", highlight=False)
