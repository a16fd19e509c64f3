"""The run form in a real Chromium against a real `pier serve`: a required
variable is empty and marked (never the text `null`), refused by the server
when missing (the CLI's rule), and given when filled in; "Run again" fills the
form from the run, attaches its files again from storage, and works for a
`pier run` made on the server's home (the `local` collection)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.integration.web.test_web_ui import sign_in
from tests.support.api_server import ADMIN_TOKEN, Collection, Server, runbook

pytestmark = pytest.mark.integration

GREET = 'echo "{{greeting}} {{author}}" > {{results_dir}}/out.txt; cp -r /app/assets {{results_dir}}/seen'


def wait_ended(server: Server, tid: str) -> dict:
    deadline = time.monotonic() + 180
    with server.client(ADMIN_TOKEN) as c:
        while True:
            listed = c.get("/api/v1/runs", params={"limit": 100}).json()["trajectories"]
            found = [r for r in listed if r["trajectory_id"] == tid]
            if found and found[0]["status"] not in ("pending", "running"):
                return found[0]
            assert time.monotonic() < deadline, found
            time.sleep(0.5)


def put_greeter(collection: Collection) -> None:
    text = runbook(GREET, snapshot="", image=collection.image).replace(
        "---\n# test", "vars:\n  author:\n  greeting: hello\n---\n# test"
    )
    with collection.client() as c:
        put = c.put(
            f"/api/v1/tasks/{collection.name}/greeter",
            content=text,
            headers={"Content-Type": "text/markdown"},
        )
    assert put.status_code == 200, put.text


def test_a_required_variable_is_empty_marked_refused_when_missing_and_given_when_filled(
    chromium, web_server: Server, web_collection: Collection, screenshots
):
    put_greeter(web_collection)
    page = sign_in(chromium, web_server, web_collection.token)
    page.goto(f"{web_server.url}/tasks/{web_collection.name}/greeter")
    author = page.locator("#var-author")
    assert author.input_value() == "" and author.get_attribute("required") is not None  # never "null"
    assert "(required)" in page.locator("label[for=var-author]").inner_text()
    greeting = page.locator("#var-greeting")
    assert greeting.input_value() == "" and greeting.get_attribute("placeholder") == "hello"
    # The browser will not send it empty; the server refuses it all the same.
    page.click("text=Start run")
    assert "/tasks/" in page.url and page.evaluate(
        "document.getElementById('var-author').validity.valueMissing"
    )
    page.evaluate("document.getElementById('var-author').removeAttribute('required')")
    page.click("text=Start run")
    error = page.locator("#form-error")
    error.wait_for()
    assert "variable {{author}} has no value" in error.inner_text()
    with web_collection.client() as c:
        assert c.get(f"/api/v1/db/trajectories/{web_collection.name}/greeter").json()["total"] == 0
    page.fill("#var-author", "ada")
    page.click("text=Start run")
    page.wait_for_url("**/runs/*")
    tid = page.url.rsplit("/", 1)[-1]
    record = wait_ended(web_server, tid)
    assert record["init_params"]["vars"] == {"author": "ada"} and record["status"] == "completed", record
    with web_collection.client() as c:
        out = c.get(f"/api/v1/file/{web_collection.name}/greeter/{tid}/results/out.txt")
    assert out.text == "hello ada\n"  # the empty greeting took its default
    page.context.close()


def test_run_again_of_a_task_run_with_files_attaches_the_same_files(
    chromium, web_server: Server, web_collection: Collection, tmp_path: Path
):
    put_greeter(web_collection)
    with web_collection.client() as c:
        sent = c.post(f"/api/v1/run/{web_collection.name}/greeter", data={"init_params": '{"vars": {"author": "bo"}}'},
                      files=[("files", ("notes.txt", b"the notes\n"))])  # fmt: skip
    assert sent.status_code == 200, sent.text
    first = wait_ended(web_server, sent.json()["trajectory_id"])
    page = sign_in(chromium, web_server, web_collection.token)
    page.goto(f"{web_server.url}/runs/{first['trajectory_id']}")
    page.click("text=Run again…")
    assert page.locator("#var-author").input_value() == "bo"
    assert page.locator("#again-files input[name=keep][value='notes.txt']").is_checked()
    page.click("text=Start run")
    page.wait_for_url("**/runs/*")
    second = wait_ended(web_server, page.url.rsplit("/", 1)[-1])
    assert second["trajectory_id"] != first["trajectory_id"] and second["status"] == "completed", second
    with web_collection.client() as c:
        seen = c.get(
            f"/api/v1/file/{web_collection.name}/greeter/{second['trajectory_id']}/results/seen/notes.txt"
        )
    assert seen.status_code == 200 and seen.text == "the notes\n"
    page.context.close()


def test_run_again_of_a_pier_run_on_the_servers_home(
    chromium, web_server: Server, tmp_path: Path, base_image: str
):
    book = tmp_path / "RUNBOOK.md"
    book.write_text(runbook(GREET, snapshot="", image=base_image).replace(
        "---\n# test", "vars:\n  author:\n  greeting: hello\n---\n# test"))  # fmt: skip
    (tmp_path / "in.txt").write_text("from the host\n")
    env = {**web_server.env(), "PIER_RESIDENT": "false"}
    done = subprocess.run(
        [sys.executable, "-m", "pier.cli", "run", str(book), "--var", "author=cli", "--file", str(tmp_path / "in.txt"), "--json"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    first = json.loads(done.stdout)
    assert first["collection"] == "local"
    page = sign_in(chromium, web_server, ADMIN_TOKEN)
    page.goto(f"{web_server.url}/runs/{first['id']}")
    page.click("text=Run again…")
    assert "not found" not in page.locator("main").inner_text()
    assert page.locator("#var-author").input_value() == "cli"
    page.fill("#var-author", "again")
    page.click("text=Start run")
    page.wait_for_url("**/runs/*")
    second = wait_ended(web_server, page.url.rsplit("/", 1)[-1])
    assert second["status"] == "completed" and second["init_params"]["vars"] == {
        "author": "again",
        "greeting": "hello",
    }, second
    kept = Path(web_server.home, "storage", second["storage_path"], "results", "seen", "in.txt")
    assert kept.read_text() == "from the host\n"
    page.context.close()
