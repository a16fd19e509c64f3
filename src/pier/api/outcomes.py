"""Ending a run's record from outside the runner: a run cancelled while it waited,
one the server stopped under, one that never got going. `end_record` and
SERVER_STOPPED live in lifecycle/outcomes.py, which the runner uses too."""

from __future__ import annotations

from pier.lifecycle.outcomes import SERVER_STOPPED, end_record
from pier.record import RunRecord, RunStatus

CANCELLED_WAITING = "the run was cancelled before it started"
CANCELLED = "the run was cancelled"


def interrupted(record: RunRecord) -> RunRecord:
    return end_record(record, RunStatus.failed, SERVER_STOPPED)


def cancelled_waiting(record: RunRecord) -> RunRecord:
    return end_record(record, RunStatus.cancelled, CANCELLED_WAITING)


def cancelled(record: RunRecord) -> RunRecord:
    return end_record(record, RunStatus.cancelled, CANCELLED)


def failed_to_start(record: RunRecord, message: str) -> RunRecord:
    return end_record(record, RunStatus.failed, message)
