"""Web UI tests: a real `pier serve` (SQLite store, real Docker for the runs
that need a sandbox) driven by a real Chromium through Playwright. Chromium is
Debian's package (/usr/bin/chromium, or $PIER_TEST_CHROMIUM); where it or
Playwright is missing the tests skip, except under CI=true, where they
fail (tests/support/services.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.api_server import SLOTS, Collection, Server, make_collection
from tests.support.services import require_service

CHROMIUM = os.environ.get("PIER_TEST_CHROMIUM", "/usr/bin/chromium")
SCREENSHOT_DIR = Path(os.environ.get("PIER_SCREENSHOT_DIR", "build/screenshots"))


@pytest.fixture(scope="package")  # its sync API keeps an event loop on this thread: not past web/
def chromium() -> Iterator[object]:
    if not Path(CHROMIUM).is_file():
        require_service(
            "Chromium", f"no Chromium at {CHROMIUM}: apt-get install chromium (or set PIER_TEST_CHROMIUM)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require_service("Playwright", "Playwright for Python is missing: uv sync (it is a dev dependency)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def web_server(tmp_path_factory, docker_backend, base_image) -> Iterator[Server]:
    srv = Server(
        home=tmp_path_factory.mktemp("pier-web"),
        db_url=f"sqlite:///{tmp_path_factory.mktemp('web-db') / 'pier.db'}",
        settings={"PIER_MAX_CONCURRENT_RUNS": str(SLOTS)},
    ).start()
    yield srv
    srv.stop()


@pytest.fixture
def web_collection(web_server: Server, base_image: str) -> Collection:
    return make_collection(web_server, base_image, prefix="web")


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    return SCREENSHOT_DIR
