"""Reaching Temporal: the client connection and the queue names, below both the
executor a server holds (executor.py) and the worker processes
(worker.py), so that neither file imports the other back."""

from __future__ import annotations

from temporalio.client import Client

from pier.errors import ServiceUnavailable
from pier.settings import Settings
from pier.telemetry import tracing


class TemporalUnavailable(ServiceUnavailable):
    """Temporal does not answer at PIER_TEMPORAL_ADDRESS."""


def control_queue(settings: Settings) -> str:
    return f"{settings.temporal_task_queue}-control"


def steps_queue(settings: Settings) -> str:
    """Where a workflow task's steps wait for any worker (steps.py)."""
    return f"{settings.temporal_task_queue}-steps"


def decision_queue(settings: Settings) -> str:
    """Where the workflows of the runs a `pier serve` accepted are decided:
    only servers poll it (as the control queue), so a worker frozen with its
    long-polls open is never handed the workflow task that reacts to its own
    silence. Runs `pier run --remote` sends, with no server needed, are
    decided on the shared queue, which workers poll too."""
    return f"{settings.temporal_task_queue}-workflows"


async def connect(settings: Settings) -> Client:
    try:
        return await Client.connect(
            settings.temporal_address,
            namespace=settings.temporal_namespace,
            interceptors=tracing.temporal_interceptors(),  # its spans join the run's trace
        )
    except RuntimeError as exc:  # the SDK's connection failure
        raise TemporalUnavailable(
            f"Temporal does not answer at PIER_TEMPORAL_ADDRESS={settings.temporal_address} "
            f"(namespace {settings.temporal_namespace}): {exc}; start it, or unset PIER_EXECUTOR"
        ) from None
