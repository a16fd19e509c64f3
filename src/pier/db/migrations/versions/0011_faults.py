"""run_keys: a client's idempotency key for a run (Idempotency-Key header).

Revision ID: faults
Revises: obs
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "faults"
down_revision: str | None = "obs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 255


def upgrade() -> None:
    op.create_table(
        "run_keys",
        sa.Column("collection", sa.String(NAME), nullable=False),
        sa.Column("key", sa.String(NAME), nullable=False),
        sa.Column("trajectory_id", sa.String(NAME), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("collection", "key", name="pk_run_keys"),
    )


def downgrade() -> None:
    op.drop_table("run_keys")
