"""The experiment tests run on a real store: SQLite, and PostgreSQL when
PIER_TEST_POSTGRES_URL is set (as the store tests do)."""

from tests.unit.db.conftest import store, store_url  # noqa: F401 - fixtures
