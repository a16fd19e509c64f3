"""Ending a run's record from outside its stages: an interruption, a process
that died, a run that never got going (the API's variants are in api/outcomes.py)."""

from __future__ import annotations

from pier.record import RunRecord, RunStatus, StageStatus, utcnow

SERVER_STOPPED = "the server stopped while this run was running; run it again"


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
