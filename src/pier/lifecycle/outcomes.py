"""Ending a run's record from outside its stages: an interruption, a process
that died, a run that never got going, a run cancelled while it waited."""

from __future__ import annotations

from pier.record import RunStatus, StageStatus, Trajectory, utcnow

SERVER_STOPPED = "the server stopped while this run was running; run it again"


def end_record(record: Trajectory, status: RunStatus, message: str) -> Trajectory:
    """Close the record: the step that was running fails with message, steps
    not reached are skipped, and the run ends with status and that error."""
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
    record.fail(stage, message)
    ended = utcnow()
    duration = None if record.started is None else round((ended - record.started).total_seconds(), 3)
    record.finish(status, ended, duration)
    return record


# Ends given to a run's record from outside the runner: cancelled while it
# waited, the server stopped under it, it never got going.
CANCELLED_WAITING = "the run was cancelled before it started"
CANCELLED = "the run was cancelled"


def interrupted(record: Trajectory) -> Trajectory:
    return end_record(record, RunStatus.failed, SERVER_STOPPED)


def cancelled_waiting(record: Trajectory) -> Trajectory:
    return end_record(record, RunStatus.cancelled, CANCELLED_WAITING)


def cancelled(record: Trajectory) -> Trajectory:
    return end_record(record, RunStatus.cancelled, CANCELLED)


def failed_to_start(record: Trajectory, message: str) -> Trajectory:
    return end_record(record, RunStatus.failed, message)
