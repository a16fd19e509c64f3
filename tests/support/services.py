"""The one rule for tests that need a service (a Docker engine, PostgreSQL,
Temporal, an S3 server, Chromium, Node, the shared runbook corpus): where it is
missing the test is skipped with the reason, except when CI=true, where it
FAILS. A CI run must test everything it claims to, never a silently smaller
suite. Every fixture that would skip for lack of a service calls
require_service; nothing else decides it."""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

REQUIRED_ENV = "CI"  # set to true by CI (and .ci/run): every service is required
POSTGRES_ENV = "PIER_TEST_POSTGRES_URL"


def services_required() -> bool:
    """True under CI: CI set to anything but empty, 0, false or no (CI systems
    set CI=true)."""
    return os.environ.get(REQUIRED_ENV, "").strip().lower() not in {"", "0", "false", "no"}


def require_service(name: str, reason: str) -> NoReturn:
    """Called where `name` is missing: skips the test saying why and how to get
    it, or fails it when services are required (CI=true)."""
    message = f"{name} is not available: {reason}"
    if services_required():
        pytest.fail(f"{message} ({REQUIRED_ENV}=true: every test must run, none may skip)", pytrace=False)
    pytest.skip(message)


def postgres_url() -> str:
    """The PostgreSQL server the tests use ($PIER_TEST_POSTGRES_URL)."""
    url = os.environ.get(POSTGRES_ENV, "").strip()
    if not url:
        require_service(
            "PostgreSQL",
            f"{POSTGRES_ENV} is not set: run scripts/start-postgres.sh and export the URL it prints",
        )
    return url


def executable(name: str, service: str, how: str) -> str:
    """The path of program `name` (node, chromium, ...) on the host."""
    path = shutil.which(name)
    if not path:
        require_service(service, f"no `{name}` on PATH: {how}")
    return path
