"""Executors: what runs accepted runs (see base.Executor)."""

from __future__ import annotations

from pier.executors.base import Executor
from pier.executors.inprocess import InProcessExecutor
from pier.executors.ports import LifecycleHooks


def make_executor(hooks: LifecycleHooks) -> Executor:
    """The executor PIER_EXECUTOR names: `inprocess` (the default: runs execute
    in this process) or `temporal` (one workflow per run, run by `pier worker`s)."""
    settings = hooks.services.settings
    if settings.executor == "temporal":
        from pier.executors.temporal import TemporalExecutor

        return TemporalExecutor(settings, hooks)
    hooks.slots.counts_top_level = True  # its runs and their fan-outs' children share one count
    return InProcessExecutor(hooks, settings.max_concurrent_runs, slots=hooks.slots)
