"""audit_events: who changed what, when, from where (names only, never a body).

Revision ID: obs
Revises: fair
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "obs"
down_revision: str | None = "fair"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 255
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("id", BIGINT, autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("collection", sa.String(NAME), nullable=True),
        sa.Column("actor", sa.String(NAME), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.Column("token_name", sa.String(NAME), nullable=True),
        sa.Column("action", sa.String(NAME), nullable=False),
        sa.Column("target", JSON, nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("client", sa.String(NAME), nullable=True),
        sa.Column("user_agent", sa.String(NAME), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_audit_events"),
    )
    op.create_index("ix_audit_events_collection_at", "audit_events", ["collection", "at"])
    op.create_index("ix_audit_events_at", "audit_events", ["at"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_at", table_name="audit_events")
    op.drop_index("ix_audit_events_collection_at", table_name="audit_events")
    op.drop_table("audit_events")
