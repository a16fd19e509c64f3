"""The Temporal executor (`PIER_EXECUTOR=temporal`) and the `pier worker` that runs
its workflows, one package:

executor.py         what a server holds: starts a run's workflow, cancels it
client.py           the connection to Temporal and the task queues' names
workflow.py         a runbook run's workflow (`pier-run`): claim, then the stages
steps.py            a workflow task's workflow (`pier-steps`): one activity a step
step_activities.py  the activities of those steps, on any worker
worker.py           `pier worker`: polls the queues and runs the lifecycle

workflow.py and steps.py import only temporalio and the standard library (steps.py also
workflow.py):
Temporal replays them in its sandbox (worker.py passes `pier` through it).
"""

from __future__ import annotations

# What the module pier.executors.temporal (now executor.py) exported, so that
# `from pier.executors.temporal import TemporalExecutor` goes on working.
from pier.executors.temporal.client import TemporalUnavailable, connect, control_queue
from pier.executors.temporal.executor import FAIRNESS_KEY_BYTES, TemporalExecutor, fair_share, workflow_config

__all__ = [
    "FAIRNESS_KEY_BYTES",
    "TemporalExecutor",
    "TemporalUnavailable",
    "connect",
    "control_queue",
    "fair_share",
    "workflow_config",
]
