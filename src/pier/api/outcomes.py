"""Ending a run's record from outside the runner: a run cancelled while it waited,
one the server stopped under, one that never got going."""

from __future__ import annotations

from pier.record import RunRecord, RunStatus, StageStatus, utcnow

SERVER_STOPPED = "the server stopped while this run was running; run it again"
CANCELLED_WAITING = "the run was cancelled before it started"
CANCELLED = "the run was cancelled"


def end_record(record: RunRecord, status: RunStatus, message: str) -> RunRecord:
    """Close the record: the step that was running fails with message, steps
    not reached are skipped, and the run ends with status and that error."""
    stage = "prepare"
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


def interrupted(record: RunRecord) -> RunRecord:
    return end_record(record, RunStatus.failed, SERVER_STOPPED)


def cancelled_waiting(record: RunRecord) -> RunRecord:
    return end_record(record, RunStatus.cancelled, CANCELLED_WAITING)


def cancelled(record: RunRecord) -> RunRecord:
    return end_record(record, RunStatus.cancelled, CANCELLED)


def failed_to_start(record: RunRecord, message: str) -> RunRecord:
    return end_record(record, RunStatus.failed, message)
