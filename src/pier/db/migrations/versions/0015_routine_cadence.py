"""routines: the platform's cadence, secret parameters and webhook.

A routine made from a cadence keeps the cadence as sent (its cron expression
is derived from it); its secret_params and webhook_secret are stored
encrypted, like a collection's environment.

Revision ID: routine_cadence
Revises: scoped_ids
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "routine_cadence"
down_revision: str | None = "scoped_ids"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("routines") as batch:
        batch.add_column(sa.Column("cadence", JSON, nullable=True))
        batch.add_column(sa.Column("secret_params_encrypted", sa.Text(), nullable=True))
        batch.add_column(sa.Column("webhook_url", sa.Text(), nullable=True))
        batch.add_column(sa.Column("webhook_secret_encrypted", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("routines") as batch:
        for name in ("webhook_secret_encrypted", "webhook_url", "secret_params_encrypted", "cadence"):
            batch.drop_column(name)
