"""experiments: a task over a matrix of agents, models and inputs, with its attempts.

Revision ID: experiments
Revises: newcomer
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "experiments"
down_revision: str | None = "newcomer"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 255
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _when(nullable: bool) -> dict:
    return {"type_": sa.DateTime(timezone=True), "nullable": nullable}


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("collection", sa.String(NAME), nullable=False),
        sa.Column("name", sa.String(NAME), nullable=False),
        sa.Column("task", sa.String(NAME), nullable=False),
        sa.Column("definition", JSON, nullable=False),
        sa.Column("task_definition", JSON, nullable=False),
        sa.Column("cells", JSON, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("lease_owner", sa.String(NAME), nullable=True),
        sa.Column("lease_until", **_when(True)),
        sa.Column("created_at", **_when(False)),
        sa.Column("updated_at", **_when(False)),
        sa.Column("started_at", **_when(False)),
        sa.Column("ended_at", **_when(True)),
        sa.PrimaryKeyConstraint("id", name="pk_experiments"),
    )
    op.create_index("ix_experiments_collection_created_at", "experiments", ["collection", "created_at"])
    op.create_index("ix_experiments_status", "experiments", ["status"])
    op.create_table(
        "experiment_attempts",
        sa.Column("id", BIGINT_PK, autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("cell", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("retry", sa.Integer(), nullable=False),
        sa.Column("trajectory_id", sa.String(NAME), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("created_at", **_when(False)),
        sa.PrimaryKeyConstraint("id", name="pk_experiment_attempts"),
        sa.UniqueConstraint(
            "experiment_id", "seq", "retry", name="uq_experiment_attempts_experiment_id_seq_retry"
        ),
        sa.UniqueConstraint("trajectory_id", name="uq_experiment_attempts_trajectory_id"),
    )
    op.create_index(
        "ix_experiment_attempts_experiment_id_state", "experiment_attempts", ["experiment_id", "state"]
    )


def downgrade() -> None:
    op.drop_table("experiment_attempts")
    op.drop_table("experiments")
