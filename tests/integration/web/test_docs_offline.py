"""The documentation site opened from disk (file://, no server, no network):
its search finds a page, as it does when served."""

from __future__ import annotations

import pytest
from tests.unit.docs.test_docs_site import ROOT, build

pytestmark = pytest.mark.integration


def test_search_works_on_the_site_opened_from_disk(chromium, tmp_path):
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    context = chromium.new_context(offline=True)
    page = context.new_page()
    page.goto((tmp_path / "site" / "index.html").as_uri() + "?q=resident")  # search opened, as a link does
    results = page.locator(".md-search-result__item")
    results.first.wait_for(timeout=15_000)
    pages = {
        a.get_attribute("href").split("?")[0].rsplit("/", 1)[-1]
        for a in page.locator(".md-search-result__link").all()
    }
    assert "cli.html" in pages and "speed.html" in pages, pages  # the pages that say "resident"
    context.close()


def test_redoc_and_swagger_render_the_schema_offline(chromium, web_server):
    """/redoc stopped at "Invalid reference token: $defs" (a dangling #/$defs/StepConfig)."""
    context = chromium.new_context()
    page = context.new_page()
    fetched: list[str] = []  # what reached the network (a request the page's policy blocks never does)
    page.on("requestfinished", lambda r: fetched.append(r.url))
    page.goto(f"{web_server.url}/redoc")
    page.locator("h2", has_text="A task's runs, newest first").first.wait_for(timeout=30_000)
    text = page.locator("body").inner_text()
    assert "Invalid reference" not in text and "Something went wrong" not in text
    page.goto(f"{web_server.url}/docs")
    page.locator(".opblock-summary").first.wait_for(timeout=30_000)
    elsewhere = [url for url in fetched if not url.startswith((web_server.url, "blob:", "data:"))]
    assert not elsewhere, elsewhere  # nothing from a CDN
    context.close()
