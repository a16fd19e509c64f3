"""Alembic environment for pier's store. Runs only through
`pier.db.engine.upgrade_to_head`, which hands over an open connection
already inside the transaction that holds the migration lock."""

from alembic import context

from pier.db.engine import VERSION_TABLE
from pier.db.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("pier's migrations need a connection: run them with pier.db.engine.upgrade_to_head")

context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER most things
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
