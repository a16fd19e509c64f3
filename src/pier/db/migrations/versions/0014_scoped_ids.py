"""runs keyed by (trajectory_id, collection); labels carry their run's collection.

An ingest may choose its run's trajectory id: another collection may choose
the same one, and neither may learn that the other did.

Revision ID: scoped_ids
Revises: experiments
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "scoped_ids"
down_revision: str | None = "experiments"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 255


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint("pk_runs", type_="primary")
        batch.create_primary_key("pk_runs", ["trajectory_id", "collection"])
    with op.batch_alter_table("run_labels") as batch:
        batch.add_column(sa.Column("collection", sa.String(NAME), server_default="", nullable=False))
    op.execute(
        "UPDATE run_labels SET collection = COALESCE("
        "(SELECT runs.collection FROM runs WHERE runs.trajectory_id = run_labels.trajectory_id), '')"
    )


def downgrade() -> None:
    with op.batch_alter_table("run_labels") as batch:
        batch.drop_column("collection")
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint("pk_runs", type_="primary")
        batch.create_primary_key("pk_runs", ["trajectory_id"])
