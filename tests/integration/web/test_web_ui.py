"""The web UI in a real Chromium against a real `pier serve`: sign-in, the live
log, a finished run's transcript/checks/outputs, downloads, labels, cancel,
the task form with a file, collection isolation, keyboard-only use, and the
runs page's weight and speed with 1,000 runs."""

from __future__ import annotations

import shutil
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from tests.support.api_server import ADMIN_TOKEN, Collection, Server, make_collection

from pier.db import Store
from pier.record import RunStatus, Trajectory

pytestmark = pytest.mark.integration

STREAMS = Path(__file__).parents[2] / "unit" / "agents" / "streams"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}

LIVE_SCRIPT = """
echo tick-1
sleep 3
echo tick-2
printf '# Findings\\n\\nAll **good**. <b>raw</b>\\n' > /app/results/report.md
echo '{"score": 7}' > /app/results/data.json
echo '{"overall_passed": true, "stages": [{"passed": true}, {"passed": false}]}' > /app/results/validation_report.json
sleep 3
echo tick-3
"""
SLOW_SCRIPT = """
ls /app/assets
echo waiting
sleep 300
"""


def sign_in(browser, server: Server, token: str, viewport: dict | None = None):
    context = browser.new_context(viewport=viewport or DESKTOP, accept_downloads=True)
    page = context.new_page()
    page.goto(server.url + "/runs")
    assert "/signin" in page.url
    page.fill("#token", token)
    page.click("form button[type=submit]")
    page.wait_for_url("**/runs")
    return page


# Every visible element with text of its own, whose colour on its (nearest
# opaque) background is under WCAG AA's 4.5:1.
LOW_CONTRAST_JS = """() => {
  const rgb = (s) => s.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; })
      .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const el of document.querySelectorAll("body *")) {
    if (!el.getClientRects().length || el.closest("svg")) continue;
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    const a = lum(rgb(getComputedStyle(el).color).slice(0, 3)), b = lum(background(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) low.push(`${el.tagName} "${el.textContent.trim().slice(0, 30)}" ${ratio.toFixed(2)}`);
  }
  return low;
}"""


def shoot(page, folder: Path, name: str) -> None:
    """The page at desktop and phone width, saved for the review; at both, no
    text under WCAG AA contrast and nothing wider than the screen."""
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        page.screenshot(path=str(folder / f"{name}-{label}.png"), full_page=True)
        assert page.evaluate(LOW_CONTRAST_JS) == [], f"{name} at {label} width"
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, f"{name} at {label} width is {overflow}px wider than the screen"
    page.set_viewport_size(DESKTOP)


def wait_status(collection: Collection, task: str, tid: str, status: str, timeout: float = 120) -> dict:
    return collection.wait(task, tid, timeout, done=lambda r: r["status"] == status)


def test_sign_in_cookie_csrf_and_sign_out(
    chromium, web_server: Server, web_collection: Collection, screenshots
):
    context = chromium.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(web_server.url + "/runs")
    assert "/signin" in page.url
    shoot(page, screenshots, "signin")
    page.fill("#token", "not-a-token")
    page.click("form button[type=submit]")
    assert "not valid" in page.locator("[role=alert]").inner_text()
    page.fill("#token", web_collection.token)
    page.click("form button[type=submit]")
    page.wait_for_url("**/runs")
    cookie = next(c for c in context.cookies() if c["name"] == "pier_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax" and not cookie["secure"]  # plain HTTP here
    assert page.locator(".who").inner_text() == web_collection.name
    # a form POST without the session's CSRF token is refused, with the cookie
    jar = {"pier_session": web_collection.token}
    refused = httpx.post(f"{web_server.url}/collections/{web_collection.name}/environment",
                         data={"name": "A", "value": "b"}, cookies=jar)  # fmt: skip
    assert refused.status_code == 403 and "reload the page" in refused.text
    # the cookie alone cannot write through the API either (writes need the header)
    api_write = httpx.patch(f"{web_server.url}/api/v1/collections/{web_collection.name}/environment",
                            json={"environment_variables": {"A": "b"}}, cookies=jar)  # fmt: skip
    assert api_write.status_code == 401
    # a sign-in form posted from another site cannot sign this browser in
    cross = httpx.post(f"{web_server.url}/signin", data={"token": web_collection.token},
                       headers={"Origin": "http://evil.example"})  # fmt: skip
    assert cross.status_code == 403 and "set-cookie" not in cross.headers
    # a bad filter is an error page that says what to do
    page.goto(web_server.url + "/runs?status=bogus")
    assert "is not a run status" in page.locator("[role=alert]").inner_text()
    page.click(".signout button")
    page.wait_for_url("**/signin")
    page.goto(web_server.url + "/tasks")
    assert "/signin" in page.url
    context.close()


def test_live_run_then_its_outputs_downloads_and_label(
    chromium, web_server: Server, web_collection: Collection, screenshots: Path
):
    web_collection.put_task("live", LIVE_SCRIPT, primary_outputs=["report.md"],
                            checks=[{"name": "has-report", "type": "file_exists", "path": "report.md"}],
                            vars={"who": "world"})  # fmt: skip
    page = sign_in(chromium, web_server, web_collection.token)
    page.evaluate("window.__samePage = true")
    tid = web_collection.run("live")
    assert page.locator("#runs-total").inner_text() == "0"
    page.locator("#runs-rows a", has_text=tid).wait_for(timeout=30_000)  # the list follows, no reload
    page.locator("#runs-total", has_text="1").wait_for(timeout=10_000)
    assert page.evaluate("window.__samePage") is True
    page.locator("#runs-rows a", has_text=tid).click()
    page.wait_for_url(f"**/runs/{tid}")
    page.evaluate("window.__samePage = true")
    page.locator("#log").get_by_text("tick-1").wait_for(timeout=120_000)
    assert "tick-3" not in page.locator("#log").inner_text()  # still running: the log is growing
    assert page.locator("#run-status").inner_text() in ("running", "pending")
    page.locator("#log").get_by_text("tick-3").wait_for(timeout=60_000)
    page.locator("#run-status .s-completed").wait_for(timeout=60_000)
    assert page.evaluate("window.__samePage") is True  # no reload: the page followed the run
    # the finished run, as the page now shows it
    assert page.locator(".transcript").get_by_text("tick-2").count() == 1
    checks = page.locator("table.checks")
    assert "has-report" in checks.inner_text() and "passed" in checks.inner_text()
    assert page.locator("#eval").inner_text().split() == ["Verdict", "PASS", "Stages", "passed", "1/2"]
    rendered = page.locator("article.preview .markdown")
    assert rendered.locator("h1").inner_text() == "Findings"
    assert rendered.locator("strong").inner_text() == "good"
    assert rendered.locator("b").count() == 0 and "<b>raw</b>" in rendered.inner_text()  # never raw HTML
    files = page.locator("ul.files li")
    assert files.first.inner_text().startswith("primary report.md")
    shoot(page, screenshots, "run")
    # downloads: a file and the zip, byte for byte what the API serves
    api = web_collection.client()
    with page.expect_download() as got:
        page.get_by_label("Download data.json").click()
    key = f"{web_collection.name}/live/{tid}/results/data.json"
    assert Path(got.value.path()).read_bytes() == api.get(f"/api/v1/file/{key}").content == b'{"score": 7}\n'
    with page.expect_download() as got:
        page.get_by_text("Download all (zip)").click()
    zip_bytes = Path(got.value.path()).read_bytes()
    assert zip_bytes[:2] == b"PK"
    api_zip = api.get(f"/api/v1/trajectory/{web_collection.name}/live/{tid}/download").content
    assert zip_bytes == api_zip
    # a label, added from the page, shows there and through the API
    page.fill("#labels input[name=key]", "review")
    page.fill("#labels input[name=value]", "approved")
    page.click("#labels button[type=submit]")
    page.locator("#labels .label", has_text="review=approved").wait_for()
    labels = web_collection.record("live", tid)["labels"]
    assert [(x["key"], x["value"]) for x in labels] == [("review", "approved")]
    # the runs list shows it; filtering by the label keeps it
    page.goto(f"{web_server.url}/runs?label=review%3Dapproved")
    assert page.locator("#runs-rows tr").count() == 1 and tid in page.locator("#runs-rows").inner_text()
    page.goto(f"{web_server.url}/runs?label=review%3Drejected")
    assert "No runs match" in page.locator("#runs-rows").inner_text()
    for name, url in (("runs", "/runs"), ("tasks", "/tasks"), ("task", f"/tasks/{web_collection.name}/live"),
                      ("overview", "/overview"), ("settings", f"/collections/{web_collection.name}/settings")):  # fmt: skip
        page.goto(web_server.url + url)
        shoot(page, screenshots, name)
    page.goto(web_server.url + "/overview")
    assert page.locator("svg.chart").count() == 3
    page.context.close()


def test_task_form_with_a_file_then_cancel(
    chromium, web_server: Server, web_collection: Collection, docker_backend, tmp_path: Path
):
    web_collection.put_task("slow", SLOW_SCRIPT, vars={"topic": "cats"})
    page = sign_in(chromium, web_server, web_collection.token)
    page.goto(f"{web_server.url}/tasks/{web_collection.name}/slow")
    # the default is shown as the default (an empty field takes it), never typed in for the user
    assert page.locator("#var-topic").input_value() == ""
    assert page.locator("#var-topic").get_attribute("placeholder") == "cats"
    page.fill("#var-topic", "dogs")
    upload = tmp_path / "notes-for-the-agent.txt"
    upload.write_text("hello\n")
    page.set_input_files("#files", str(upload))
    page.click("text=Start run")
    page.wait_for_url("**/runs/*")
    tid = page.url.rsplit("/", 1)[-1]
    record = web_collection.record("slow", tid)
    assert record["steps"]["run"]["inputs"]["vars"] == {"topic": "dogs"}
    assert len(record["steps"]["run"]["inputs"]["file_paths"]) == 1
    page.locator("#log").get_by_text("notes-for-the-agent.txt").wait_for(
        timeout=120_000
    )  # it reached /app/assets
    assert web_collection.sandboxes(docker_backend), "the running run has a sandbox"
    page.once("dialog", lambda dialog: dialog.accept())  # "Cancel this run?"
    page.click("text=Cancel run")
    page.locator("#run-status .s-cancelled").wait_for(timeout=60_000)
    assert web_collection.record("slow", tid)["status"] == RunStatus.cancelled.value
    deadline = time.monotonic() + 60
    while web_collection.sandboxes(docker_backend):
        assert time.monotonic() < deadline, "the cancelled run's sandbox is still there"
        time.sleep(0.5)
    # re-run with the same variables: the form comes back filled with them
    page.click("text=Run again…")
    assert page.locator("#var-topic").input_value() == "dogs"
    page.context.close()


def _insert_runs(server: Server, collection: str, task: str, count: int) -> list[str]:
    """Runs written straight into the server's store (no sandbox needed)."""
    ids = []
    with Store.open(server.db_url) as store:
        for index in range(count):
            created = datetime.now(UTC) - timedelta(hours=6 * index)  # over days, for the charts
            record = Trajectory.new(uuid.uuid4().hex, collection, task, created=created)
            record.status = RunStatus.failed if index % 4 == 0 else RunStatus.completed
            record.outputs.success = record.status == RunStatus.completed
            record.duration_seconds = 10.0 + index % 30
            record.outputs.agent = "script"
            record.outputs.usage = {"cost_usd": 0.01}
            store.create_run(record)
            ids.append(record.trajectory_id)
    return ids


def test_a_collection_token_sees_only_its_collection(
    chromium, web_server: Server, base_image: str, screenshots
):
    mine = make_collection(web_server, base_image, prefix="web")
    theirs = make_collection(web_server, base_image, prefix="web")
    theirs.put_task("secret", "echo hi")
    (their_run,) = _insert_runs(web_server, theirs.name, "secret", 1)
    folder = web_server.home / "storage" / theirs.name / "secret" / their_run / "results"
    folder.mkdir(parents=True)
    (folder / "a.txt").write_text("theirs")
    page = sign_in(chromium, web_server, mine.token)
    assert their_run not in page.locator("#runs-rows").inner_text()
    for url, status in [
        (f"/runs/{their_run}", 404),
        (f"/runs/{their_run}/files/a.txt", 404),
        (f"/tasks/{theirs.name}/secret", 403),
        (f"/collections/{theirs.name}/settings", 403),
        (f"/runs?collection={theirs.name}", 403),
        (f"/api/v1/file/{theirs.name}/secret/{their_run}/results/a.txt", 404),
        (f"/api/v1/trajectory/{theirs.name}/secret/{their_run}/download", 403),
        (f"/api/v1/runs/{their_run}/events", 404),
    ]:
        response = page.goto(web_server.url + url)
        assert response is not None and response.status == status, url
        assert "theirs" not in page.content()
    page.goto(f"{web_server.url}/runs/{their_run}")
    shoot(page, screenshots, "not-found")
    # the admin sees it
    admin = sign_in(chromium, web_server, ADMIN_TOKEN)
    assert admin.goto(f"{web_server.url}/runs/{their_run}").status == 200
    page.context.close()
    admin.context.close()


def test_keyboard_only(chromium, web_server: Server, base_image: str):
    coll = make_collection(web_server, base_image, prefix="web")
    (tid,) = _insert_runs(web_server, coll.name, "kb", 1)
    context = chromium.new_context(viewport=DESKTOP)
    page = context.new_page()

    def tab_to(predicate: str, limit: int = 60) -> None:
        for _ in range(limit):
            if page.evaluate(f"(() => {{ const el = document.activeElement; return {predicate}; }})()"):
                return
            page.keyboard.press("Tab")
        raise AssertionError(f"Tab never reached {predicate}")

    page.goto(web_server.url + "/signin")
    tab_to("el.id === 'token'")  # focused on load (autofocus), else reached by Tab
    page.keyboard.type(coll.token)
    page.keyboard.press("Enter")
    page.wait_for_url("**/runs")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")  # the skip link, then on into the page
    tab_to(f"el.textContent === '{tid}'")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/runs/{tid}")
    tab_to("el.name === 'key'")
    page.keyboard.type("kb")
    page.keyboard.press("Tab")
    page.keyboard.type("yes")
    page.keyboard.press("Enter")
    page.locator("#labels .label", has_text="kb=yes").wait_for()
    tab_to("el.textContent === 'Tasks'")
    page.keyboard.press("Enter")
    page.wait_for_url("**/tasks")
    context.close()


def test_runs_page_with_1000_runs_is_light_and_fast(
    chromium, web_server: Server, base_image: str, screenshots
):
    coll = make_collection(web_server, base_image, prefix="web")
    _insert_runs(web_server, coll.name, "many", 1000)
    # a fresh browser context (empty cache), already signed in: the first load
    context = chromium.new_context(viewport=DESKTOP)
    context.add_cookies([{"name": "pier_session", "value": coll.token, "url": web_server.url}])
    page = context.new_page()
    responses: list = []
    page.on("response", lambda response: responses.append(response))
    page.goto(web_server.url + "/runs", wait_until="load")
    timing = page.evaluate(
        "(() => { const n = performance.getEntriesByType('navigation')[0];"
        " return {ttfb: n.responseStart, html: n.responseEnd, dom: n.domContentLoadedEventEnd,"
        " load: n.loadEventEnd - n.startTime}; })()"
    )
    transferred = sum(len(r.body()) + sum(len(k) + len(v) for k, v in r.headers.items()) for r in responses)
    print(f"\nruns page, 1000 runs in the store: loaded in {timing['load']:.0f} ms "
          f"(first byte {timing['ttfb']:.0f} ms, HTML in {timing['html']:.0f} ms, DOM ready {timing['dom']:.0f} ms), {transferred / 1024:.1f} KB transferred")  # fmt: skip
    assert page.locator("#runs-total").inner_text() == "1000"
    assert page.locator("#runs-rows tr").count() == 50
    first = page.locator("#runs-rows a").first.inner_text()
    page.click("text=Older →")
    page.wait_for_url("**page=2")
    assert (
        page.locator("#runs-rows tr").count() == 50 and first not in page.locator("#runs-rows").inner_text()
    )
    page.reload(wait_until="load")
    warm = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    print(f"runs page again (warm): loaded in {warm:.0f} ms")
    assert timing["load"] < 10_000
    assert transferred < 300 * 1024
    page.goto(web_server.url + "/overview")
    assert page.locator("svg.chart").count() == 3  # a task with runs, though never pushed as a task
    assert "1000 run(s) · success rate 75%" in page.locator("main").inner_text()
    shoot(page, screenshots, "overview-1000")
    page.context.close()


def test_settings_environment_and_tokens(chromium, web_server: Server, base_image: str, screenshots):
    coll = make_collection(web_server, base_image, prefix="web")
    page = sign_in(chromium, web_server, coll.token)
    page.click("text=Settings")
    page.fill("#environment input[name=name]", "API_KEY")
    page.fill("#environment input[name=value]", "s3cret-value")
    page.click("#environment button:has-text('Set')")
    page.locator("#environment code", has_text="API_KEY").wait_for()
    assert "s3cret-value" not in page.content()  # values are never shown
    with coll.client() as api:
        assert api.get(f"/api/v1/collections/{coll.name}/environment").json()["names"] == ["API_KEY"]
    assert "managed with the admin token" in page.locator("#tokens").inner_text()
    page.once("dialog", lambda dialog: dialog.accept())  # "Delete API_KEY from the collection's environment?"
    page.get_by_label("Delete API_KEY").click()
    page.locator("#environment .empty").wait_for()
    # the admin creates a token (shown once) and revokes it
    admin = sign_in(chromium, web_server, ADMIN_TOKEN)
    admin.goto(f"{web_server.url}/collections")
    admin.click(f"a[href='/collections/{coll.name}/settings']")
    admin.fill("#tokens input[name=label]", "ci")
    admin.click("text=Create token")
    token = admin.locator("#new-token").inner_text()
    assert web_server.client(token).get(f"/api/v1/tasks/{coll.name}").status_code == 200
    shoot(admin, screenshots, "settings-admin")
    token_id = web_server.client().get(f"/api/v1/collections/{coll.name}/tokens").json()[-1]["id"]
    admin.once("dialog", lambda dialog: dialog.accept())  # "Revoke token N?"
    admin.get_by_label(f"Revoke token {token_id}").click()
    admin.wait_for_url("**/settings#tokens")
    assert web_server.client(token).get(f"/api/v1/tasks/{coll.name}").status_code == 401
    assert token not in admin.content()
    page.context.close()
    admin.context.close()


def test_live_log_resumes_after_the_server_restarts(
    chromium, tmp_path_factory, docker_backend, base_image: str
):
    """The page keeps following across a lost connection: EventSource
    reconnects with Last-Event-ID, and no line is shown twice or lost."""
    server = Server(
        home=tmp_path_factory.mktemp("pier-web-restart"),
        db_url=f"sqlite:///{tmp_path_factory.mktemp('web-restart-db') / 'pier.db'}",
    ).start()
    try:
        coll = make_collection(server, base_image, prefix="web")
        coll.put_task("slow", "echo before-restart\nsleep 300")
        page = sign_in(chromium, server, coll.token)
        tid = coll.run("slow")
        page.goto(f"{server.url}/runs/{tid}")
        page.evaluate("window.__samePage = true")
        page.locator("#log").get_by_text("before-restart").wait_for(timeout=120_000)
        port = server.port
        server.stop()  # the run ends failed: the server stopped while it ran
        page.locator("#log-state", has_text="reconnecting").wait_for(timeout=30_000)
        server.start(port=port)
        page.locator("#run-status .s-failed").wait_for(timeout=60_000)
        # the status comes from the page's periodic refresh, which may beat the
        # stream's reconnection: the log is whole once the stream's end arrived
        page.locator('#run-live[data-ended="yes"]').wait_for(timeout=60_000)
        assert page.evaluate("window.__samePage") is True
        seqs = page.eval_on_selector_all("#log span", "spans => spans.map(s => Number(s.dataset.seq))")
        with Store.open(server.db_url) as store:
            stored = [e.seq for e in store.events(tid, 0, 10_000)]
        assert seqs == stored  # every line once, in order
        assert "server stopped" in page.locator("#log").inner_text()
        page.context.close()
    finally:
        server.stop()


def test_an_agent_cli_run_reads_as_a_transcript(chromium, web_server: Server, base_image: str):
    """A claude-code run (its stream saved in logs/): messages, tool calls and
    their results as the adapter reads them, never raw JSON; usage and cost."""
    coll = make_collection(web_server, base_image, prefix="web")
    (tid,) = _insert_runs(web_server, coll.name, "cli", 1)
    with Store.open(web_server.db_url) as store:
        record = store.get_run(tid)
        record.outputs.agent, record.outputs.model = "claude-code", "claude-sonnet-4-5"
        record.outputs.usage = {"prompt_tokens": 200, "completion_tokens": 50, "cost_usd": 0.0012}
        store.save_run(record, replace_final=True)
    logs = web_server.home / "storage" / coll.name / "cli" / tid / "logs"
    logs.mkdir(parents=True)
    shutil.copy(STREAMS / "claude-code.jsonl", logs / "claude-code.jsonl")
    page = sign_in(chromium, web_server, coll.token)
    row = page.locator("#runs-rows tr", has_text=tid)
    assert "claude-code" in row.inner_text() and "claude-sonnet-4-5" in row.inner_text()
    assert "$0.0012" in row.inner_text()
    page.goto(f"{web_server.url}/runs/{tid}")
    transcript = page.locator(".transcript")
    assert transcript.locator(".t-call .text").first.inner_text().startswith("tool Write(")
    assert transcript.locator(".t-result").count() >= 1
    assert transcript.locator(".t-message", has_text="Done: the answer is in").count() >= 1
    assert '{"type"' not in transcript.inner_text()
    cells = page.locator("#usage tbody tr").first.locator("td").all_inner_texts()
    assert cells[2:6] == ["claude-sonnet-4-5", "200", "50", "$0.0012"], cells  # model, tokens in, out, cost
    page.context.close()
