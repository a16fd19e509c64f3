"""What a newcomer sees first, in a real Chromium against a real `pier serve`:
a running run's live log on screen without scrolling (and following), a
cancelled run that reads cancelled, confirmations before cancelling, the tasks
page's facts and start button, a favicon, `local` among the collections, and
the overview worded and priced as the runs list is."""

from __future__ import annotations

import httpx
import pytest
from tests.integration.web.test_web_ui import DESKTOP, _insert_runs, shoot, sign_in
from tests.support.api_server import ADMIN_TOKEN, Collection, Server, runbook

pytestmark = pytest.mark.integration

TICKING = "for i in $(seq 1 400); do echo tick-$i; sleep 0.15; done\necho done > {{results_dir}}/done.txt"


def test_a_running_runs_log_is_on_screen_and_follows_then_cancel_asks_and_reads_cancelled(
    chromium, web_server: Server, web_collection: Collection, screenshots
):
    web_collection.put_task("ticking", TICKING)
    page = sign_in(chromium, web_server, web_collection.token)
    tid = web_collection.run("ticking")
    page.goto(f"{web_server.url}/runs/{tid}")
    page.locator("#log").get_by_text("tick-60").wait_for(timeout=120_000)
    box = page.locator("#log").bounding_box()
    assert box is not None and box["y"] + 150 < DESKTOP["height"], box  # on screen, no scrolling
    assert page.evaluate("window.scrollY") == 0
    following = "(() => { const l = document.getElementById('log'); return l.scrollHeight > l.clientHeight && l.scrollTop + l.clientHeight >= l.scrollHeight - 8; })()"
    page.wait_for_function(following, timeout=30_000)  # longer than its box: kept at the newest line
    shoot(page, screenshots, "newcomer-run-running")
    # Cancel asks first: saying no changes nothing, saying yes cancels.
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("text=Cancel run")
    assert asked and "Cancel this run?" in asked[0]
    assert web_collection.record("ticking", tid)["status"] == "running"
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("text=Cancel run")
    page.locator("#run-status .s-cancelled").wait_for(timeout=60_000)
    page.reload()
    text = page.locator("#run-live").inner_text()
    assert "Cancelled" in text and "Failed" not in text, text
    shoot(page, screenshots, "newcomer-run-cancelled")
    page.context.close()


def test_the_tasks_page_shows_what_each_task_is_and_starts_it(
    chromium, web_server: Server, web_collection: Collection, screenshots
):
    text = runbook(
        "echo hi > {{results_dir}}/hi.txt", snapshot="", image=web_collection.image, model="none/none"
    )
    with web_collection.client() as c:
        put = c.put(
            f"/api/v1/tasks/{web_collection.name}/greeter",
            json={"workflow": text, "description": "Says hi, for the tasks page"},
        )
    assert put.status_code == 200, put.text
    tid = web_collection.run("greeter")
    web_collection.wait("greeter", tid)
    page = sign_in(chromium, web_server, web_collection.token)
    page.goto(f"{web_server.url}/tasks")
    row = page.locator("table.task-table tr", has_text="greeter")
    shown = row.inner_text()
    for fact in ("Says hi, for the tasks page", "script · none/none", "completed", "100%"):
        assert fact in shown, (fact, shown)
    shoot(page, screenshots, "newcomer-tasks")
    page.goto(f"{web_server.url}/overview?collection={web_collection.name}")
    section = page.locator("section.card", has_text="greeter").inner_text()
    # no run reported a cost: "—", as the runs list shows it, never "$0.0000"
    assert "cost —" in section and "$0.0000" not in section, section
    page.goto(f"{web_server.url}/tasks")
    page.locator("table.task-table tr", has_text="greeter").get_by_text("Start a run…").click()
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url("**/runs/*")
    assert page.url.rsplit("/", 1)[-1] != tid
    page.context.close()


def test_favicon_local_collection_and_overview_wording(chromium, web_server: Server, screenshots):
    icon = httpx.get(f"{web_server.url}/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    _insert_runs(web_server, "local", "hello", 1)  # what `pier run` on the server's home leaves
    page = sign_in(chromium, web_server, ADMIN_TOKEN)
    assert page.locator("link[rel=icon]").get_attribute("href") == "/static/favicon.svg"
    page.goto(f"{web_server.url}/collections")
    assert "local" in page.locator("main").inner_text()
    page.goto(f"{web_server.url}/overview?collection=local")
    section = page.locator("section.card", has_text="local/hello").inner_text()
    assert "the last 1 days" not in section and "the one day with runs" in section, section
    page.context.close()
