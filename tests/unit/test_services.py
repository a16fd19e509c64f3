"""The one rule for a missing service: skip with the reason, or fail under CI."""

from __future__ import annotations

import pytest

from tests.support.services import executable, postgres_url, require_service


@pytest.mark.parametrize("value", ["", "0", "false", "False", "no"])
def test_outside_ci_a_missing_service_skips_saying_why(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception, match=r"^Temporal is not available: no server at :7233$"):
        require_service("Temporal", "no server at :7233")


@pytest.mark.parametrize("value", ["true", "1", "yes"])
def test_under_ci_a_missing_service_fails(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(
        pytest.fail.Exception, match=r"^Temporal is not available: no server at :7233 \(CI=true"
    ):
        require_service("Temporal", "no server at :7233")


def test_postgres_and_programs_follow_the_rule(monkeypatch):
    monkeypatch.delenv("PIER_TEST_POSTGRES_URL", raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="PIER_TEST_POSTGRES_URL is not set"):
        postgres_url()
    with pytest.raises(pytest.fail.Exception, match="no `no-such-program-x` on PATH: install it"):
        executable("no-such-program-x", "Chromium", "install it")
    monkeypatch.setenv("PIER_TEST_POSTGRES_URL", "postgresql+psycopg://u:p@127.0.0.1:1/db")
    assert postgres_url() == "postgresql+psycopg://u:p@127.0.0.1:1/db"
    assert executable("sh", "a shell", "install one").endswith("/sh")
