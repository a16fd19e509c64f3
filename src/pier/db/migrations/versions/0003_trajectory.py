"""trajectory: run records take the platform's Trajectory shape (steps keyed by
workflow step, `steps.run` holding pier's stages and outputs, `error` a
string); labels get their own table, tasks a description, collections a
trial-key budget.

Every stored record is rewritten in place; nothing it held is dropped.

Revision ID: 0003_trajectory
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_trajectory"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 255
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# Keys of the old record that moved into steps.run.outputs unchanged.
OUTPUT_KEYS = ("results_files", "primary_files", "checks", "eval", "usage", "warnings", "sandbox")


def trajectory_of(old: dict[str, Any], updated: str | None) -> dict[str, Any]:
    """The new shape of one old record (a pure function of its JSON, so that this
    migration never depends on the live model, which will move on)."""
    if "steps" in old and isinstance(old["steps"], dict):
        return old  # already converted
    collection, task, tid = old["collection"], old["task"], old["trajectory_id"]
    base = f"{collection}/{task}/{tid}"
    error = old.get("error") or None
    outputs: dict[str, Any] = {key: old[key] for key in OUTPUT_KEYS if key in old}
    results = [dict(f, key=f"{base}/results/{f['path']}") for f in old.get("results_files") or []]
    init_params = old.get("init_params") or {}
    outputs.update(
        results_files=results,
        files=[f["key"] for f in results],
        success=old.get("success"),
        stages=old.get("steps") or [],
        agent=init_params.get("agent"),
        model=init_params.get("model"),
    )
    created = old.get("created_at")
    status = old.get("status", "pending")
    return {
        "name": task,
        "collection": collection,
        "trajectory_id": tid,
        "storage_path": base,
        "status": status,
        "attributes": {"asset_type": "trajectory", "asset_filename": "run.json", "created": created,
                       "params": {"local_path": old["storage_path"]} if old.get("storage_path") else {}},
        "created": created,
        "updated": updated or old.get("ended_at") or created,
        "author": "pier",
        "metadata_uri": f"{base}/run.json",
        "steps": {
            "run": {
                "inputs": init_params,
                "outputs": outputs,
                "activity": "runbook",
                "key": "run",
                "depends_on": [],
                "created": created,
                "ended": old.get("ended_at"),
                "duration_seconds": old.get("duration_seconds"),
                "author": "pier",
                "origin": {},
                "config": {},
            }
        },
        "total_steps": ["run"],
        "completed_steps": ["run"] if status == "completed" else [],
        "init_params": init_params,
        "step_configs": {},
        "org_id": None,
        "error": error["message"] if isinstance(error, dict) else error,
        "failed_stage": error.get("stage") if isinstance(error, dict) else None,
        "started": old.get("started_at"),
        "ended": old.get("ended_at"),
        "duration_seconds": old.get("duration_seconds"),
    }  # fmt: skip


def _iso(when: datetime | None) -> str | None:
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).isoformat()


def upgrade() -> None:
    op.create_table(
        "run_labels",
        sa.Column("id", BIGINT_PK, autoincrement=True, nullable=False),
        sa.Column("trajectory_id", sa.String(NAME), nullable=False),
        sa.Column("key", sa.String(NAME), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("author", sa.String(NAME), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_run_labels"),
    )
    op.create_index("ix_run_labels_trajectory_id", "run_labels", ["trajectory_id"])
    op.create_index("ix_run_labels_key", "run_labels", ["key"])
    op.create_table(
        "trials",
        sa.Column("collection", sa.String(NAME), nullable=False),
        sa.Column("activated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("runs_used", sa.Integer(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("collection", name="pk_trials"),
    )
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("description", sa.Text(), nullable=False, server_default=""))
    runs = sa.table(
        "runs", sa.column("trajectory_id", sa.String()), sa.column("updated_at", sa.DateTime(timezone=True)),
        sa.column("record", JSON),
    )  # fmt: skip
    connection = op.get_bind()
    rows = connection.execute(sa.select(runs.c.trajectory_id, runs.c.updated_at, runs.c.record)).all()
    for tid, updated, record in rows:
        new = trajectory_of(record, _iso(updated))
        if new is not record:
            connection.execute(runs.update().where(runs.c.trajectory_id == tid).values(record=new))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("description")
    op.drop_table("run_labels")
    op.drop_table("trials")
