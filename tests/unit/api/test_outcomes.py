from __future__ import annotations

from datetime import timedelta

from pier.api.outcomes import SERVER_STOPPED, cancelled_waiting, interrupted
from pier.record import RunRecord, RunStatus, StepStatus, utcnow


def test_interrupted_fails_the_running_step_and_skips_the_rest():
    record = RunRecord.new(
        "r", "c", "t", status=RunStatus.running, started_at=utcnow() - timedelta(seconds=5)
    )
    record.step("prepare").status = StepStatus.completed
    record.step("create").status = StepStatus.running
    ended = interrupted(record)
    assert ended.status == RunStatus.failed and ended.success is False
    assert ended.error.stage == "create" and ended.error.message == SERVER_STOPPED
    assert [s.status for s in ended.steps][:3] == [
        StepStatus.completed,
        StepStatus.failed,
        StepStatus.skipped,
    ]
    assert ended.duration_seconds >= 5


def test_cancelled_waiting_names_prepare():
    ended = cancelled_waiting(RunRecord.new("r", "c", "t"))
    assert ended.status == RunStatus.cancelled and ended.error.stage == "prepare"
    assert all(s.status == StepStatus.skipped for s in ended.steps)
