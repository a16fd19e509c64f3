"""A kept run's page offers "Continue in this sandbox" (docs/sessions.md): a
new run of a task of the run's collection with init_params.continue_from,
refused on the page in the claim's words when the sandbox is another
collection's run's, not kept, or already claimed, and started otherwise."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pier.db import Store
from pier.settings import Settings
from pier.web.session import csrf_token
from tests.support.kept import kept_run
from tests.support.web_app import admin_web_client

ADMIN = "admin-token-for-continue"
RUNBOOK = "---\nagent: script\nsnapshot: ''\nimage: pier-base:bookworm\n---\n```bash\necho hi > {{results_dir}}/out.txt\n```\n"
FORM = 'action="/runs/{}/continue"'


@pytest.fixture
def client(pier_home, monkeypatch) -> Iterator[TestClient]:
    with admin_web_client(monkeypatch, ADMIN) as client:
        for name in ("team", "other"):
            put = client.put(f"/api/v1/tasks/{name}/next", content=RUNBOOK,
                             headers={**api(), "Content-Type": "text/markdown"})  # fmt: skip
            assert put.status_code == 200, put.text
        yield client


def api() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


def wait_ended(client: TestClient, collection: str, tid: str) -> dict:
    deadline = time.monotonic() + 60
    while True:
        record = client.get(f"/api/v1/db/trajectory/{collection}/next/{tid}", headers=api()).json()
        if record["status"] not in ("pending", "running"):
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.1)


def go_on(client: TestClient, tid: str, **fields: str):
    return client.post(f"/runs/{tid}/continue", data={"csrf": csrf_token(ADMIN), "task": "next", **fields},
                       follow_redirects=False)  # fmt: skip


def runs_of(collection: str) -> int:
    with Store.open(Settings().db_url) as store:
        return store.list_runs(collection, "next", limit=100)[1]


def test_a_kept_runs_page_offers_the_collections_tasks_and_a_not_kept_ones_does_not(client) -> None:
    kept, _ = kept_run("team")
    page = client.get(f"/runs/{kept.trajectory_id}").text
    assert "Continue in this sandbox" in page and FORM.format(kept.trajectory_id) in page
    assert re.search(r'<select id="continue-task" name="task"[^>]*><option>next</option></select>', page), (
        page
    )
    not_kept, _ = kept_run("team", kept=False)
    assert FORM.format(not_kept.trajectory_id) not in client.get(f"/runs/{not_kept.trajectory_id}").text


def test_continue_starts_a_run_in_the_kept_sandbox_and_a_second_is_refused_as_in_use(client) -> None:
    started = client.post("/tasks/team/next/run", data={"csrf": csrf_token(ADMIN), "keep_sandbox": "true"},
                          follow_redirects=False)  # fmt: skip
    assert started.status_code == 303, started.text
    first = wait_ended(client, "team", started.headers["location"].rsplit("/", 1)[-1])
    kept = first["steps"]["run"]["outputs"]["sandbox"]
    assert first["status"] == "completed" and kept["kept_until"], (first["error"], kept)
    first_id = first["trajectory_id"]
    assert FORM.format(first_id) in client.get(f"/runs/{first_id}").text
    sent = go_on(client, first_id, keep_sandbox="true")
    assert sent.status_code == 303, sent.text
    tid = sent.headers["location"].rsplit("/", 1)[-1]
    second = wait_ended(client, "team", tid)
    assert second["init_params"]["continue_from"] == first_id, second["init_params"]
    assert second["init_params"]["keep_sandbox"] is True
    assert second["status"] == "completed", (second["error"], second["failed_stage"])
    assert second["parent"] == first_id and second["steps"]["run"]["outputs"]["sandbox"]["id"] == kept["id"]
    assert second["steps"]["run"]["outputs"]["sandbox"]["kept_until"]  # kept again: a chain
    assert FORM.format(tid) in client.get(f"/runs/{tid}").text
    page = html.unescape(client.get(f"/runs/{first_id}").text)
    assert "Continued by" in page and FORM.format(first_id) not in page
    before = runs_of("team")
    again = go_on(client, first_id)  # a page shown before the claim: refused, no run made
    text = html.unescape(again.text)
    assert again.status_code == 409, again.text
    assert f"cannot continue from run {first_id}: its sandbox is in use by run {tid}" in text
    assert 'role="alert" id="sandbox-refusal"' in again.text and runs_of("team") == before


def test_a_run_whose_sandbox_was_not_kept_is_refused_on_its_page(client) -> None:
    not_kept, _ = kept_run("team", kept=False)
    sent = go_on(client, not_kept.trajectory_id)
    assert sent.status_code == 409, sent.text
    assert "its sandbox was not kept: run the first runbook with --keep" in html.unescape(sent.text)
    assert runs_of("team") == 0


def test_another_collections_run_is_refused_and_its_token_sees_no_run(client) -> None:
    kept, sandbox = kept_run("team")
    sent = go_on(
        client, kept.trajectory_id, collection="other"
    )  # the admin, naming another collection's task
    assert sent.status_code == 409, sent.text
    assert (
        f"cannot continue from run {kept.trajectory_id}: no such run in collection 'other'"
        in html.unescape(sent.text)
    )
    assert runs_of("other") == 0
    theirs = client.tokens["other"]  # type: ignore[attr-defined]
    client.cookies.set("pier_session", theirs)
    refused = client.post(
        f"/runs/{kept.trajectory_id}/continue", data={"csrf": csrf_token(theirs), "task": "next"}
    )
    assert refused.status_code == 404 and runs_of("other") == 0 and runs_of("team") == 0
    mine = client.tokens["team"]  # type: ignore[attr-defined]
    client.cookies.set("pier_session", mine)
    assert (
        client.post(f"/runs/{kept.trajectory_id}/continue", data={"task": "next"}).status_code == 403
    )  # no CSRF
    crossed = client.post(f"/runs/{kept.trajectory_id}/continue",
                          data={"csrf": csrf_token(mine), "task": "next", "collection": "other"})  # fmt: skip
    assert crossed.status_code == 403 and runs_of("other") == 0, crossed.text
    assert not sandbox.frozen
