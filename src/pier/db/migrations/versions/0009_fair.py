"""fair shares: per-collection quota overrides, and the durable webhook queue.

Revision ID: fair
Revises: 0004_routines
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "fair"
down_revision: str | None = "0004_routines"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 255
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _when(nullable: bool) -> dict:
    return {"type_": sa.DateTime(timezone=True), "nullable": nullable}


def upgrade() -> None:
    op.create_table(
        "collection_quotas",
        sa.Column("collection", sa.String(NAME), nullable=False),
        sa.Column("quotas", JSON, nullable=False),
        sa.Column("updated_at", **_when(False)),
        sa.PrimaryKeyConstraint("collection", name="pk_collection_quotas"),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(NAME), nullable=False),
        sa.Column("collection", sa.String(NAME), nullable=False),
        sa.Column("trajectory_id", sa.String(NAME), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("sealed_secret", sa.Text(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", **_when(False)),
        sa.Column("next_attempt_at", **_when(False)),
        sa.Column("deadline_at", **_when(False)),
        sa.Column("leased_until", **_when(True)),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_deliveries"),
    )
    op.create_index(
        "ix_webhook_deliveries_state_next_attempt_at", "webhook_deliveries", ["state", "next_attempt_at"]
    )


def downgrade() -> None:
    op.drop_table("webhook_deliveries")
    op.drop_table("collection_quotas")
