"""A run's page whose sandbox is kept has Pause, Resume and "Save as snapshot"
(docs/sessions.md): forms with the CSRF token over the services the API's
routes use, a refusal shown on the page, and only for a viewer who may use the
run's collection."""

from __future__ import annotations

import html
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pier.db import Store
from pier.lifecycle.sessions import snapshot_ref
from pier.sandbox.fake import FakeBackend
from pier.settings import Settings
from pier.web.session import csrf_token
from tests.support.kept import kept_run
from tests.support.web_app import admin_web_client

ADMIN = "admin-token-for-kept"
BUTTONS = ("Pause sandbox", "Resume sandbox", "Save as snapshot")


@pytest.fixture
def client(pier_home, monkeypatch) -> Iterator[TestClient]:
    with admin_web_client(monkeypatch, ADMIN) as client:
        yield client


def sign_in(client: TestClient, token: str) -> str:
    client.cookies.set("pier_session", token)
    return token


def test_the_buttons_are_on_a_kept_runs_page_only(client: TestClient) -> None:
    kept, _ = kept_run("team")
    page = html.unescape(client.get(f"/runs/{kept.trajectory_id}").text)
    for button in BUTTONS:
        assert button in page
    assert f'action="/runs/{kept.trajectory_id}/sandbox/pause"' in page
    assert f'name="csrf" value="{csrf_token(ADMIN)}"' in page
    not_kept, _ = kept_run("team", kept=False)
    page = client.get(f"/runs/{not_kept.trajectory_id}").text
    assert not any(button in page for button in BUTTONS)


def test_pause_resume_and_save_call_the_services(client: TestClient) -> None:
    kept, sandbox = kept_run("team")
    url = f"/runs/{kept.trajectory_id}/sandbox"
    csrf = {"csrf": csrf_token(ADMIN)}
    paused = client.post(f"{url}/pause", data=csrf, follow_redirects=False)
    assert paused.status_code == 303, paused.text
    assert sandbox.frozen
    assert "Sandbox paused" in client.get(paused.headers["location"]).text
    resumed = client.post(f"{url}/resume", data=csrf, follow_redirects=False)
    assert resumed.status_code == 303 and not sandbox.frozen, resumed.text
    saved = client.post(f"{url}/snapshot", data=csrf | {"name": "prepared"}, follow_redirects=False)
    assert saved.status_code == 303, saved.text
    backend = FakeBackend(Settings())
    assert backend.image_exists(snapshot_ref("team", "prepared"))
    backend.remove_image(snapshot_ref("team", "prepared"))


def test_a_refusal_is_shown_on_the_runs_page(client: TestClient) -> None:
    kept, sandbox = kept_run("team")
    url = f"/runs/{kept.trajectory_id}/sandbox"
    csrf = {"csrf": csrf_token(ADMIN)}
    bad = client.post(f"{url}/snapshot", data=csrf | {"name": "Not A Name"})
    assert bad.status_code == 422
    assert "invalid snapshot name" in html.unescape(bad.text) and 'role="alert"' in bad.text
    sandbox.delete()  # gone from the engine; the record still says kept
    kept.outputs.sandbox.kept_until = 1.0
    with Store.open(Settings().db_url) as store:
        store.save_run(kept, replace_final=True)
    expired = client.post(f"{url}/pause", data=csrf)
    assert expired.status_code == 409, expired.text
    assert "expired" in html.unescape(expired.text)


def test_the_collections_viewer_may_pause_and_another_collections_may_not(client: TestClient) -> None:
    kept, sandbox = kept_run("team")
    url = f"/runs/{kept.trajectory_id}/sandbox/pause"
    mine = sign_in(client, client.tokens["team"])  # type: ignore[attr-defined]
    assert "Pause sandbox" in client.get(f"/runs/{kept.trajectory_id}").text
    theirs = sign_in(client, client.tokens["other"])  # type: ignore[attr-defined]
    assert client.get(f"/runs/{kept.trajectory_id}").status_code == 404
    assert client.post(url, data={"csrf": csrf_token(theirs)}).status_code == 404 and not sandbox.frozen
    sign_in(client, mine)
    assert client.post(url, data={}).status_code == 403 and not sandbox.frozen  # no CSRF token: refused
    assert client.post(url, data={"csrf": csrf_token(mine)}, follow_redirects=False).status_code == 303
    assert sandbox.frozen


def test_a_sandbox_a_command_holds_reads_so_and_links_no_run(client: TestClient) -> None:
    held, _ = kept_run("team")
    held.outputs.sandbox.continued_by = "pier:pause"  # what a pause writes while it works
    with Store.open(Settings().db_url) as store:
        store.save_run(held, replace_final=True)
    page = html.unescape(client.get(f"/runs/{held.trajectory_id}").text)
    assert "a command is at it now (pause)" in page
    assert 'href="/runs/pier:pause"' not in page and "Pause sandbox" not in page
