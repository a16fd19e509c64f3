"""model_usage: what a collection's chat-completions passthrough calls used.

One row per collection, provider, model and key source (the collection's own
key, or the server's trial key), its counts added to as each call ends.

Revision ID: model_usage
Revises: audit_chain
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "model_usage"
down_revision: str | None = "audit_chain"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _count(name: str) -> sa.Column:
    return sa.Column(name, sa.BigInteger(), nullable=False, server_default="0")


def upgrade() -> None:
    op.create_table(
        "model_usage",
        sa.Column("collection", sa.String(255), nullable=False),
        sa.Column("provider", sa.String(255), nullable=False),
        sa.Column("model", sa.String(255), nullable=False),
        sa.Column("via", sa.String(16), nullable=False),
        _count("requests"),
        _count("errors"),
        _count("prompt_tokens"),
        _count("completion_tokens"),
        _count("cached_tokens"),
        sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"),
        _count("unpriced_calls"),
        sa.Column("first_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("collection", "provider", "model", "via", name="pk_model_usage"),
    )


def downgrade() -> None:
    op.drop_table("model_usage")
