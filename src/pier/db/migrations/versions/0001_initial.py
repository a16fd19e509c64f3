"""Initial schema: runs and their log events, plus the collections, tokens,
tasks and collection environment that the API serves.

Revision ID: 0001
Revises:
Create Date: 2024-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 255
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIGINT_PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _when() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("trajectory_id", sa.String(NAME), nullable=False),
        sa.Column("collection", sa.String(NAME), nullable=False),
        sa.Column("task", sa.String(NAME), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.Column("record", JSON, nullable=False),
        sa.PrimaryKeyConstraint("trajectory_id", name="pk_runs"),
    )
    op.create_index("ix_runs_collection_task_created", "runs", ["collection", "task", "created_at"])
    op.create_index("ix_runs_status", "runs", ["status"])

    op.create_table(
        "run_events",
        sa.Column("id", BIGINT_PK, autoincrement=True, nullable=False),
        sa.Column("trajectory_id", sa.String(NAME), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("ts", _when(), nullable=False),
        sa.Column("stage", sa.String(64), nullable=True),
        sa.Column("line", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_run_events"),
        sa.UniqueConstraint("trajectory_id", "seq", name="uq_run_events_trajectory_id_seq"),
    )

    op.create_table(
        "collections",
        sa.Column("name", sa.String(NAME), nullable=False),
        sa.Column("created_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_collections"),
    )

    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("collection", sa.String(NAME), nullable=False),
        sa.Column("token_hash", sa.String(NAME), nullable=False),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("label", sa.String(NAME), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_tokens_token_hash"),
    )
    op.create_index("ix_tokens_collection", "tokens", ["collection"])

    op.create_table(
        "tasks",
        sa.Column("collection", sa.String(NAME), nullable=False),
        sa.Column("name", sa.String(NAME), nullable=False),
        sa.Column("definition", JSON, nullable=False),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("collection", "name", name="pk_tasks"),
    )

    op.create_table(
        "collection_env",
        sa.Column("collection", sa.String(NAME), nullable=False),
        sa.Column("name", sa.String(NAME), nullable=False),
        sa.Column("value_encrypted", sa.Text(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("collection", "name", name="pk_collection_env"),
    )


def downgrade() -> None:
    for table in ("collection_env", "tasks", "tokens", "collections", "run_events", "runs"):
        op.drop_table(table)
