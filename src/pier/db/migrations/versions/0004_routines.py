"""routines: scheduled runs of a task (cron expression, time zone, init_params).

Revision ID: 0004_routines
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004_routines"
down_revision: str | None = "0003_trajectory"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 255
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _when(nullable: bool) -> dict:
    return {"type_": sa.DateTime(timezone=True), "nullable": nullable}


def upgrade() -> None:
    op.create_table(
        "routines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("collection", sa.String(NAME), nullable=False),
        sa.Column("task", sa.String(NAME), nullable=False),
        sa.Column("name", sa.String(NAME), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("cron_expression", sa.String(NAME), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("init_params", JSON, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("next_run_at", **_when(True)),
        sa.Column("run_now_at", **_when(True)),
        sa.Column("last_run_at", **_when(True)),
        sa.Column("last_trajectory_id", sa.String(NAME), nullable=True),
        sa.Column("created_at", **_when(False)),
        sa.Column("updated_at", **_when(False)),
        sa.PrimaryKeyConstraint("id", name="pk_routines"),
        sa.UniqueConstraint("collection", "task", "name", name="uq_routines_collection_task_name"),
    )
    op.create_index("ix_routines_enabled_next_run_at", "routines", ["enabled", "next_run_at"])


def downgrade() -> None:
    op.drop_table("routines")
