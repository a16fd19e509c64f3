"""A fleet per test, as the fleet tests have (tests/integration/fleet/conftest.py)."""

from tests.integration.fleet.conftest import fleet

__all__ = ["fleet"]
