"""Where a run keeps its temporary files, in a module of its own: the code that
ends abandoned runs (every read-only command) needs it without the run context."""

from __future__ import annotations

from pathlib import Path

from pier.settings import Settings, make_private_dir


def scratch_dir(settings: Settings, trajectory_id: str) -> Path:
    """Where a run keeps its temporary files (the assets tar, check sources cloned
    on the host): one folder per run under PIER_HOME, so that what a killed run
    left is found and removed by whoever ends it (lifecycle/orphans.py). Its
    `outputs/` is what collect copies out, published to storage at save."""
    return make_private_dir(settings.scratch_root) / trajectory_id
