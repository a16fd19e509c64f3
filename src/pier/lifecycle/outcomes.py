"""Ending a run's record from outside its stages: an interruption, a process
that died, a run that never got going (the API's variants are in api/outcomes.py)."""

from __future__ import annotations

from pier.record import RunError, RunRecord, RunStatus, StepStatus, utcnow

SERVER_STOPPED = "the server stopped while this run was running; run it again"


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
