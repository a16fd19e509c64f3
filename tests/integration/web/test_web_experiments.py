"""The experiment page in a real Chromium against a real `pier serve` (SQLite,
the fake backend in its rated mode: no Docker): the matrix with its cells
coloured by pass rate, figures that fill in while the experiment runs without
a reload, and drill-down from a cell to its runs and on to one run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.web.test_web_ui import sign_in
from tests.support.api_server import ADMIN_TOKEN, Server

pytestmark = pytest.mark.integration

RUNBOOK = '---\nagent: script\nimage: pier-fake:latest\nsnapshot: ""\n---\n# r\n\n```bash\necho pier-fake-success-rate={{rate}}\n```\n'
ATTEMPTS = 15


@pytest.fixture
def rated_server(tmp_path: Path) -> Iterator[Server]:
    home = tmp_path / "home"
    home.mkdir()
    settings = {
        "PIER_SANDBOX_BACKEND": "fake-rated",
        "PIER_EXPERIMENT_POLL_SEC": "0.3",
        "PIER_SWEEP_FOREIGN": "false",
    }
    srv = Server(home=home, db_url=f"sqlite:///{tmp_path / 'pier.db'}", settings=settings).start()
    yield srv
    srv.stop()


def test_the_matrix_fills_live_and_drills_down_to_a_run(
    chromium, rated_server: Server, screenshots: Path
) -> None:
    with rated_server.client(ADMIN_TOKEN) as admin:
        token = admin.post("/api/v1/collections", json={"name": "webexp"}).json()["token"]
    with rated_server.client(token) as client:
        body = {"name": "colours", "runbook": RUNBOOK, "attempts": ATTEMPTS, "concurrency": 1,
                "matrix": {"vars": [{"rate": 0}, {"rate": 1}]}}  # fmt: skip
        created = client.post("/api/v1/experiments/webexp", json=body)
        assert created.status_code == 201, created.text
        experiment_id = created.json()["id"]

    page = sign_in(chromium, rated_server, token)
    page.set_default_timeout(90_000)  # a loaded machine: the server's first results read loads statsmodels
    page.click("nav >> text=Experiments")
    page.click(f"a[href='/experiments/{experiment_id}']")
    assert page.locator("#matrix td.cell").count() == 2
    before = int(page.locator("#matrix td[data-cell='1']").get_attribute("data-attempts") or 0)
    assert before < ATTEMPTS, "the experiment ended before the page could watch it"
    url = page.url
    # the figures change without a reload, and stop once it has completed
    page.wait_for_function(
        f"() => Number(document.querySelector(\"#matrix td[data-cell='1']\").dataset.attempts) > {before}",
        timeout=60_000,
    )
    page.wait_for_function(
        "() => document.querySelector('#experiment-status').dataset.status === 'completed'", timeout=180_000
    )
    assert page.url == url
    never, always = page.locator("#matrix td[data-cell='0']"), page.locator("#matrix td[data-cell='1']")
    assert never.get_attribute("data-successes") == "0" and always.get_attribute("data-successes") == str(
        ATTEMPTS
    )
    assert "pass-0" in (never.get_attribute("class") or "") and "pass-10" in (
        always.get_attribute("class") or ""
    )
    assert never.evaluate("e => getComputedStyle(e).backgroundColor") != always.evaluate(
        "e => getComputedStyle(e).backgroundColor"
    )
    assert "a real difference" in page.locator(".comparisons").inner_text()
    assert page.locator("a[href$='/export?format=csv']").count() == 1
    page.screenshot(path=str(screenshots / "experiment.png"), full_page=True)

    always.locator("a").click()
    page.wait_for_url(f"**/experiments/{experiment_id}/cells/1")
    rows = page.locator("#cell-runs tbody tr")
    assert rows.count() == ATTEMPTS
    rows.first.locator("a").click()
    page.wait_for_url("**/runs/*")
    assert "completed" in page.inner_text("main")

    # the export link serves the CSV to the signed-in browser (the session cookie reads the API)
    with page.expect_download() as download:
        page.goto(url)
        page.click("a[href$='/export?format=csv']")
    text = Path(download.value.path()).read_text()
    assert text.count("\n") == 2 * ATTEMPTS + 1
