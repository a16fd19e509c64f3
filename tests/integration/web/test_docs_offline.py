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
