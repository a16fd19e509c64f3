"""The seam between the API and whatever executes runs.

The API is given an Executor (see pier.executors.make_executor) and never
knows which: the in-process one runs the lifecycle on this server's threads;
the Temporal one starts a workflow per run and executes nothing itself.
Worker-side, a run needs its ports (pier.executors.ports.RunPorts): sandbox
backend, store, storage, the event sink that wakes live followers, and the
cancel token its context carries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from pier.lifecycle.context import RunContext

CancelOutcome = Literal["pending", "running"]


@dataclass(frozen=True)
class Job:
    """One accepted run. `payload` is the caller's (a Payload for the API)."""

    trajectory_id: str
    payload: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Holding:
    """What an executor knows of a run it was given: still open, or ended (how,
    and why when it failed) — a durable executor's run may end without its
    record saying so (the database was down when it ended)."""

    open: bool
    ended_as: str = ""  # "completed", "failed", "canceled", "terminated", "timed_out"
    reason: str = ""


class Executor(Protocol):
    # True when runs live on beyond this process (a workflow service owns
    # them): a starting server then neither fails "running" runs nor restarts
    # pending ones from its own memory.
    durable: bool

    def start(self) -> None:
        """Begin executing what is submitted."""

    def submit(self, job: Job) -> None:
        """Queue an accepted run (its record is stored, pending). Idempotent
        for a durable executor: a run it already holds is not started twice."""

    def cancel(self, trajectory_id: str) -> CancelOutcome | None:
        """Cancel a run it holds; None when it holds no such run."""

    def holding(self, trajectory_id: str) -> Holding | None:
        """Whether it holds the run, and how that run ended; None when it never
        got it (or has forgotten it)."""

    def ready(self) -> str | None:
        """None when it can take runs now, else why not (for /health/ready)."""

    def pending(self) -> list[str]: ...

    def running(self) -> list[str]: ...

    def stop(self, interrupt: Callable[[RunContext], None] | None = None) -> list[str]:
        """Start nothing more; the ids it still held pending."""
