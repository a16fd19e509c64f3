"""Ending a run's record from outside the runner: a run cancelled while it waited,
one the server stopped under, one that never got going."""

from __future__ import annotations

from pier.record import RunError, RunRecord, RunStatus, StepStatus, utcnow

SERVER_STOPPED = "the server stopped while this run was running; run it again"
CANCELLED_WAITING = "the run was cancelled before it started"
CANCELLED = "the run was cancelled"


def end_record(record: RunRecord, status: RunStatus, message: str) -> RunRecord:
    """Close the record: the step that was running fails with message, steps
    not reached are skipped, and the run ends with status and that error."""
    stage = "prepare"
    for step in record.steps:
        if step.status == StepStatus.running:
            stage = step.name
            step.status, step.ended, step.detail = StepStatus.failed, utcnow(), message
        elif step.status == StepStatus.pending:
            step.status = StepStatus.skipped
    if record.error is None:
        record.error = RunError(stage=stage, message=message)
    record.status = status
    record.success = False
    record.ended_at = utcnow()
    if record.started_at is not None:
        record.duration_seconds = round((record.ended_at - record.started_at).total_seconds(), 3)
    return record


def interrupted(record: RunRecord) -> RunRecord:
    return end_record(record, RunStatus.failed, SERVER_STOPPED)


def cancelled_waiting(record: RunRecord) -> RunRecord:
    return end_record(record, RunStatus.cancelled, CANCELLED_WAITING)


def cancelled(record: RunRecord) -> RunRecord:
    return end_record(record, RunStatus.cancelled, CANCELLED)


def failed_to_start(record: RunRecord, message: str) -> RunRecord:
    return end_record(record, RunStatus.failed, message)
