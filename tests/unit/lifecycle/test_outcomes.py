from __future__ import annotations

from datetime import timedelta

from pier.lifecycle.outcomes import SERVER_STOPPED, cancelled_waiting, interrupted
from pier.record import RunStatus, StageStatus, Trajectory, utcnow


def test_interrupted_fails_the_running_stage_and_skips_the_rest():
    record = Trajectory.new("r", "c", "t", status=RunStatus.running, started=utcnow() - timedelta(seconds=5))
    record.stage("prepare").status = StageStatus.completed
    record.stage("create").status = StageStatus.running
    ended = interrupted(record)
    assert ended.status == RunStatus.failed and ended.success is False
    assert ended.failed_stage == "create" and ended.error == SERVER_STOPPED
    assert [s.status for s in ended.stages][:3] == [
        StageStatus.completed,
        StageStatus.failed,
        StageStatus.skipped,
    ]
    assert ended.duration_seconds >= 5
    assert ended.steps["run"].ended == ended.ended and ended.completed_steps == []


def test_cancelled_waiting_names_prepare():
    ended = cancelled_waiting(Trajectory.new("r", "c", "t"))
    assert ended.status == RunStatus.cancelled and ended.failed_stage == "prepare"
    assert all(s.status == StageStatus.skipped for s in ended.stages)
