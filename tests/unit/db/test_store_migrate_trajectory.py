"""0003_trajectory rewrites every stored run record into the Trajectory shape;
nothing the old record held is lost."""

from __future__ import annotations

import json

from alembic import command
from sqlalchemy import text

from pier.db import Store
from pier.db.engine import alembic_config, create_store_engine
from pier.record import RunStatus, StageStatus

OLD_RECORD = {
    "trajectory_id": "old1",
    "collection": "team",
    "task": "report",
    "status": "failed",
    "success": False,
    "error": {"stage": "check", "message": "2 checks failed"},
    "init_params": {"agent": "script", "model": "m-1", "vars": {"topic": "rust"}},
    "steps": [
        {"name": "prepare", "status": "completed", "started": "2025-01-01T12:00:00Z",
         "ended": "2025-01-01T12:00:01Z", "duration_seconds": 1.0, "detail": None},
        {"name": "check", "status": "failed", "started": None, "ended": None,
         "duration_seconds": None, "detail": "2 checks failed"},
    ],
    "results_files": [{"path": "report.md", "content_type": "text/markdown", "extension": "md", "size": 12}],
    "primary_files": ["report.md"],
    "checks": [{"name": "c", "type": "file_exists", "passed": False, "exit_code": 1, "output": "no",
                "duration_s": 0.1}],
    "eval": {"overall_passed": False, "verdict": "FAIL", "checks": "1/2"},
    "usage": {"cost_usd": 0.25, "input_tokens": 10},
    "warnings": ["w1"],
    "storage_path": "/srv/pier/storage/team/report/old1",
    "sandbox": {"source": "image", "name": None, "image": "img:1", "cpus": 2.0, "memory": "4G",
                "network": True, "id": "abc"},
    "created_at": "2025-01-01T12:00:00Z",
    "started_at": "2025-01-01T12:00:00Z",
    "ended_at": "2025-01-01T12:01:00Z",
    "duration_seconds": 60.0,
}  # fmt: skip


def _at_0002_with_an_old_row(url: str) -> None:
    engine = create_store_engine(url)
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), "0002")
            connection.execute(
                text(
                    "INSERT INTO runs (trajectory_id, collection, task, status, created_at, updated_at, record) "
                    "VALUES ('old1', 'team', 'report', 'failed', :t, :t, :r)"
                ),
                {"t": "2025-01-01 12:01:00", "r": json.dumps(OLD_RECORD)},
            )
    finally:
        engine.dispose()


def test_an_old_record_reads_back_as_a_trajectory(store_url: str) -> None:
    _at_0002_with_an_old_row(store_url)
    with Store.open(store_url) as store:
        got = store.get_run("old1")
    assert (got.name, got.collection, got.status) == ("report", "team", RunStatus.failed)
    assert got.error == "2 checks failed" and got.failed_stage == "check"
    assert got.init_params == OLD_RECORD["init_params"]
    run = got.steps["run"]
    assert run.activity == "runbook" and run.inputs == OLD_RECORD["init_params"]
    out = run.outputs
    assert out.success is False
    assert [(s.name, s.status) for s in out.stages] == [
        ("prepare", StageStatus.completed),
        ("check", StageStatus.failed),
    ]
    assert out.files == ["team/report/old1/results/report.md"]
    assert out.results_files[0].path == "report.md" and out.results_files[0].key == out.files[0]
    assert out.primary_files == ["report.md"]
    assert out.checks[0].output == "no" and out.eval == OLD_RECORD["eval"]
    assert out.usage == OLD_RECORD["usage"] and out.warnings == ["w1"]
    assert out.sandbox.image == "img:1" and out.sandbox.id == "abc"
    assert (out.agent, out.model) == ("script", "m-1")
    assert got.storage_path == "team/report/old1"
    assert got.attributes.params["local_path"] == OLD_RECORD["storage_path"]
    assert got.created.isoformat().startswith("2025-01-01T12:00:00")
    assert got.ended is not None and got.duration_seconds == 60.0
    assert got.total_steps == ["run"] and got.completed_steps == []
    assert got.workflow_id == "team-report--old1"
