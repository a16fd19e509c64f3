"""How a run ended: one taxonomy of outcomes that the record (`outcome`), the
experiments, the metrics and the traces all use; and ending a run's record from
outside its stages (an interruption, a process that died, a run that never got
going, a run cancelled while it waited).

The agent's outcomes are attempts that count: it succeeded, its checks failed,
it wrote nothing, it failed, it timed out, it hit a limit of its sandbox, its
provider refused it, rate-limited it or failed under it, its model budget ran
out. A run refused for its own input (`invalid`: the runbook, its image, its
files) counts too: trying again gives the same. Only pier's own failures (the
engine, storage, the database, a lost worker or server, a bug) are `infra`:
an experiment retries those and leaves them out of its pass rates.
"""

from __future__ import annotations

from enum import StrEnum

from pier.errors import CapabilityError, InputError, StageError
from pier.record import RunStatus, StageStatus, Trajectory, utcnow


class Outcome(StrEnum):
    success = "success"
    checks_failed = "checks_failed"  # the agent finished; a check did not pass
    no_results = "no_results"  # the agent finished with nothing in /app/results
    agent_failed = "agent_failed"  # the agent exited non-zero
    timed_out = "timed_out"
    limit_reached = "limit_reached"  # memory, disk, processes or output size
    provider_refused = "provider_refused"  # the provider answered 401/403
    rate_limited = "rate_limited"  # the provider answered 429
    provider_error = "provider_error"  # the provider answered 5xx (or could not be reached)
    budget_exhausted = "budget_exhausted"  # the run's model budget stopped a request
    invalid = "invalid"  # the run's own input: runbook, image, files
    step_failed = "step_failed"  # a workflow's step failed: its activity, a path, its parameters
    infra = "infra"  # pier, the engine, storage, the database, a lost worker
    cancelled = "cancelled"

    @property
    def counts(self) -> bool:
        """An attempt that counts in a pass rate (everything but infra and cancelled)."""
        return self not in (Outcome.infra, Outcome.cancelled)


# What each reads as in a summary or a table.
DESCRIPTIONS = {
    Outcome.success: "succeeded",
    Outcome.checks_failed: "checks failed",
    Outcome.no_results: "wrote no results",
    Outcome.agent_failed: "agent failed",
    Outcome.timed_out: "timed out",
    Outcome.limit_reached: "hit a sandbox limit",
    Outcome.provider_refused: "provider refused",
    Outcome.rate_limited: "provider rate-limited",
    Outcome.provider_error: "provider failed",
    Outcome.budget_exhausted: "model budget used up",
    Outcome.invalid: "refused input",
    Outcome.step_failed: "a workflow step failed",
    Outcome.infra: "pier or infrastructure failure",
    Outcome.cancelled: "cancelled",
}

# The stages before the agent: a failure there ends the run (no collect, no checks).
BEFORE_AGENT = frozenset({"prepare", "create", "setup"})


def classify(stage: str, exc: BaseException) -> Outcome:
    """The outcome of a stage's failure: the one the error names, else by what
    failed. Anything unplanned is pier's (a bug, the engine, storage)."""
    if isinstance(exc, StageError):
        if exc.outcome is not None:
            return Outcome(exc.outcome)
        return {"prepare": Outcome.invalid, "run_agent": Outcome.agent_failed}.get(stage, Outcome.infra)
    if isinstance(exc, InputError | CapabilityError):
        return Outcome.invalid
    return Outcome.infra


def finished_outcome(record: Trajectory) -> Outcome:
    """The outcome of a run that has just finished (status and success set)."""
    if record.status == RunStatus.cancelled:
        return Outcome.cancelled
    if record.outcome is not None:
        return Outcome(record.outcome)
    if record.error is not None:
        return Outcome.infra
    return Outcome.success if record.success else Outcome.checks_failed


def outcome_of(record: Trajectory) -> Outcome | None:
    """A run's outcome; None while it runs. Records written before runs kept
    their outcome get one from their failed stage and error."""
    if not record.status.terminal:
        return None
    if record.status == RunStatus.cancelled:
        return Outcome.cancelled
    if record.outcome is not None and record.outcome in Outcome.__members__:
        return Outcome(record.outcome)
    return _legacy(record)


_STOPPED_MARKERS = ("the server stopped", "stopped before the run ended", "worker", "lost this run")


def _legacy(record: Trajectory) -> Outcome:
    error, stage = record.error or "", record.failed_stage
    if record.error is None:
        return Outcome.success if record.success else Outcome.checks_failed
    if any(marker in error for marker in _STOPPED_MARKERS):
        return Outcome.infra
    if stage == "collect" and "nothing in /app/results" in error:
        return Outcome.no_results
    if stage == "prepare":
        return Outcome.invalid
    if stage == "setup" and ("lacks what every sandbox needs" in error or " has no " in error):
        return Outcome.invalid
    if stage == "run_agent":
        for marker, found in (("timed out", Outcome.timed_out), ("model budget", Outcome.budget_exhausted),
                              ("out of memory", Outcome.limit_reached)):  # fmt: skip
            if marker in error:
                return found
        return Outcome.agent_failed
    return Outcome.infra


def drain_expired(signal_name: str, timeout_sec: float, who: str = "the server") -> str:
    """Why a run that a shutdown's drain did not wait out ended (`who`: the
    process that stopped, "the server" or "worker <identity>")."""
    return (
        f"{who} stopped on {signal_name} (a shutdown) before the run ended: it did not finish "
        f"within PIER_DRAIN_TIMEOUT_SEC ({timeout_sec:g}s) of the signal; run it again"
    )


def end_record(
    record: Trajectory, status: RunStatus, message: str, outcome: Outcome | None = None
) -> Trajectory:
    """Close the record: the step that was running fails with message, steps
    not reached are skipped, and the run ends with status and that error. Its
    outcome: `outcome`, else cancelled or (pier's own end for it) infra."""
    stage = "prepare"
    for name, wstep in record.steps.items() if record.is_workflow else ():
        if wstep.status == StageStatus.running:
            stage = name
            wstep.status, wstep.ended, wstep.error = StageStatus.failed, utcnow(), message
    for step in record.stages:
        if step.status == StageStatus.running:
            stage = step.name
            step.status, step.ended, step.detail = StageStatus.failed, utcnow(), message
        elif step.status == StageStatus.pending:
            step.status = StageStatus.skipped
    if outcome is None:
        outcome = Outcome.cancelled if status == RunStatus.cancelled else Outcome.infra
    record.fail(stage, message, outcome)
    ended = utcnow()
    duration = None if record.started is None else round((ended - record.started).total_seconds(), 3)
    record.finish(status, ended, duration)
    if status == RunStatus.cancelled or record.outcome is None:
        record.outcome = outcome
    return record


SERVER_STOPPED = "the server stopped while this run was running; run it again"
# Ends given to a run's record from outside the runner: cancelled while it
# waited, the server stopped under it, it never got going.
CANCELLED_WAITING = "the run was cancelled before it started"
CANCELLED = "the run was cancelled"


def interrupted(record: Trajectory, message: str = SERVER_STOPPED) -> Trajectory:
    return end_record(record, RunStatus.failed, message)


def cancelled_waiting(record: Trajectory) -> Trajectory:
    return end_record(record, RunStatus.cancelled, CANCELLED_WAITING)


def cancelled(record: Trajectory) -> Trajectory:
    return end_record(record, RunStatus.cancelled, CANCELLED)


def failed_to_start(record: Trajectory, message: str, outcome: Outcome = Outcome.infra) -> Trajectory:
    """A run that never got going: pier's failure, unless `outcome` says it was
    refused for its input (Outcome.invalid)."""
    return end_record(record, RunStatus.failed, message, outcome)
