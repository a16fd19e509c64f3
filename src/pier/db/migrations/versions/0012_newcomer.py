"""routines: ids never reused after a delete (SQLite AUTOINCREMENT).

Revision ID: newcomer
Revises: faults
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "newcomer"
down_revision: str | None = "faults"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # SQLite gives a deleted highest id to the next row unless the table is
    # AUTOINCREMENT, which only a rebuilt table can become. PostgreSQL's
    # sequence never reuses an id: nothing to do there.
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table("routines", recreate="always", table_kwargs={"sqlite_autoincrement": True}):
            pass


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table(
            "routines", recreate="always", table_kwargs={"sqlite_autoincrement": False}
        ):
            pass
