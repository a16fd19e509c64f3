"""audit_events: which object an entry is about, its outcome, and a hash chain (tamper evidence).

Each entry's hash covers its fields and the previous entry's hash, so a
changed or deleted row breaks the chain (`pier audit verify`). Entries from
before this migration stay unchained.

Revision ID: audit_chain
Revises: routine_cadence
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "audit_chain"
down_revision: str | None = "routine_cadence"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("audit_events") as batch:
        batch.add_column(sa.Column("object_id", sa.String(255), nullable=True))
        batch.add_column(sa.Column("outcome", sa.String(16), nullable=True))
        batch.add_column(sa.Column("source", sa.String(16), nullable=True))
        batch.add_column(sa.Column("request_id", sa.String(128), nullable=True))
        batch.add_column(sa.Column("prev_hash", sa.String(64), nullable=True))
        batch.add_column(sa.Column("entry_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_events") as batch:
        for column in ("entry_hash", "prev_hash", "request_id", "source", "outcome", "object_id"):
            batch.drop_column(column)
