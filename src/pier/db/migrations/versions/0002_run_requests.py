"""run_requests: an accepted run's request, so that pending runs survive a
server restart (pier serve re-queues them).

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-10
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 255
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "run_requests",
        sa.Column("trajectory_id", sa.String(NAME), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("request", JSON, nullable=False),
        sa.PrimaryKeyConstraint("trajectory_id", name="pk_run_requests"),
    )


def downgrade() -> None:
    op.drop_table("run_requests")
