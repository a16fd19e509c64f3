"""The run form never invents a value: a required variable is empty and
marked, a missing one refused by the plan's rules (the CLI's and the API's),
a default shown as the default; "run again" round-trips every field."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pier import web
from pier.api.app import create_app
from pier.settings import Settings, get_settings
from pier.web.session import csrf_token

ADMIN = "admin-token-for-the-form"
RUNBOOK = """---
agent: script
snapshot: ''
image: pier-base:bookworm
vars:
  author:
  greeting: hello
---
```bash
echo "{{greeting}} {{author}}" > {{results_dir}}/out.txt
```
"""


@pytest.fixture
def client(pier_home, monkeypatch) -> Iterator[TestClient]:
    monkeypatch.setenv("PIER_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", "tests.support.fleet_backend:backend")
    monkeypatch.setenv("PIER_SWEEP_INTERVAL_SEC", "3600")
    get_settings.cache_clear()
    with TestClient(create_app(Settings(), pages=web.install)) as client:
        client.post("/api/v1/collections", json={"name": "team"}, headers=api())
        put = client.put(
            "/api/v1/tasks/team/greet", content=RUNBOOK, headers={**api(), "Content-Type": "text/markdown"}
        )
        assert put.status_code == 200, put.text
        client.cookies.set("pier_session", ADMIN)
        yield client


def api() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


def field(html: str, name: str) -> str:
    found = re.search(rf'<input id="var-{name}"[^>]*>', html)
    assert found, html
    return found.group(0)


def test_a_required_variable_is_empty_and_marked_and_a_default_shown_as_the_default(client):
    html = client.get("/tasks/team/greet").text
    author = field(html, "author")
    assert 'value=""' in author and " required" in author and "null" not in author, author
    greeting = field(html, "greeting")
    assert 'value=""' in greeting and 'placeholder="hello"' in greeting, greeting
    assert "(default: <code>hello</code>)" in html


def test_a_missing_required_variable_is_refused_as_the_cli_refuses_it(client):
    sent = client.post("/tasks/team/greet/run", data={"csrf": csrf_token(ADMIN), "var.author": "", "var.greeting": ""},
                       follow_redirects=False)  # fmt: skip
    assert sent.status_code == 422, sent.text
    assert "variable {{author}} has no value" in sent.text  # the plan's own words (pier.lifecycle.plan)
    assert 'value=""' in field(sent.text, "author")  # the form again, nothing invented
    listed = client.get("/api/v1/db/trajectories/team/greet", headers=api())
    assert listed.status_code == 200 and listed.json()["total"] == 0, listed.text  # no run was made


def test_a_filled_variable_is_given_and_an_empty_one_takes_its_default(client):
    sent = client.post("/tasks/team/greet/run", data={"csrf": csrf_token(ADMIN), "var.author": "ada", "var.greeting": ""},
                       follow_redirects=False)  # fmt: skip
    assert sent.status_code == 303, sent.text
    tid = sent.headers["location"].rsplit("/", 1)[-1]
    record = client.get(f"/api/v1/db/trajectory/team/greet/{tid}", headers=api()).json()
    assert record["init_params"]["vars"] == {"author": "ada"}


def wait_ended(client: TestClient, collection: str, task: str, tid: str) -> dict:
    import time

    deadline = time.monotonic() + 60
    while True:
        listed = client.get(
            "/api/v1/runs", headers=api(), params={"collection": collection, "task": task, "limit": 100}
        )
        record = next(r for r in listed.json()["trajectories"] if r["trajectory_id"] == tid)
        if record["status"] not in ("pending", "running"):
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.1)


def result_files(client: TestClient, record: dict) -> dict[str, bytes]:
    from pier.lifecycle.wiring import Services

    storage = Services().storage  # the server's (a `local` run's files have no collection's API)
    files = record["steps"]["run"]["outputs"]["results_files"]
    return {f["path"]: storage.open(f["key"]).read() for f in files}


def again(client: TestClient, tid: str, **fields) -> str:
    sent = client.post(
        f"/runs/{tid}/again", data={"csrf": csrf_token(ADMIN), **fields}, follow_redirects=False
    )
    assert sent.status_code == 303, sent.text
    return sent.headers["location"].rsplit("/", 1)[-1]


def test_run_again_of_a_task_run_with_files_attaches_the_same_files(client):
    sent = client.post(
        "/api/v1/run/team/greet",
        headers=api(),
        data={"init_params": '{"vars": {"author": "ada"}, "model": "none/none"}'},
        files=[("files", ("notes.txt", b"the notes\n")), ("files", ("data.csv", b"a,b\n1,2\n"))],
    )
    assert sent.status_code == 200, sent.text
    first = wait_ended(client, "team", "greet", sent.json()["trajectory_id"])
    html = client.get(f"/runs/{first['trajectory_id']}").text
    assert f'href="/runs/{first["trajectory_id"]}/again"' in html
    form = client.get(f"/runs/{first['trajectory_id']}/again").text
    assert 'value="ada"' in field(form, "author")
    assert 'name="model" value="none/none"' in form
    assert form.count('name="keep"') == 2 and "attached again from storage" in form
    tid = again(
        client,
        first["trajectory_id"],
        **{"var.author": "ada", "model": "none/none", "keep": ["notes.txt", "data.csv"]},
    )
    second = wait_ended(client, "team", "greet", tid)
    assert (
        second["init_params"]["vars"] == {"author": "ada"} and second["init_params"]["model"] == "none/none"
    )
    files = result_files(client, second)
    assert files["asset-notes.txt"] == b"the notes\n" and files["asset-data.csv"] == b"a,b\n1,2\n", files


def test_run_again_of_a_cli_run_in_the_local_collection(client, tmp_path):
    """It said "collection 'local' not found": a `pier run` stores no task."""
    from typer.testing import CliRunner

    from pier import cli

    book = tmp_path / "RUNBOOK.md"
    book.write_text(RUNBOOK)
    attached = tmp_path / "in.txt"
    attached.write_bytes(b"from the host\n")
    done = CliRunner().invoke(
        cli.app, ["run", str(book), "--var", "author=cli", "--file", str(attached), "--json"]
    )
    first = __import__("json").loads(done.output[done.output.index("{") :])
    assert first["collection"] == "local" and first["success"] is True, done.output
    form = client.get(f"/runs/{first['id']}/again")
    assert form.status_code == 200, form.text
    assert "not stored in local" in form.text and 'value="cli"' in field(form.text, "author")
    assert 'name="keep" value="in.txt" checked' in form.text
    tid = again(client, first["id"], **{"var.author": "again", "keep": "in.txt"})
    second = wait_ended(client, "local", first["task"], tid)
    assert second["status"] == "completed", second
    assert second["init_params"]["vars"] == {"author": "again"}
    assert result_files(client, second)["asset-in.txt"] == b"from the host\n"


def test_a_file_no_longer_stored_is_shown_so_and_refused_by_name_never_dropped(client):
    import html
    import posixpath

    from pier.lifecycle.wiring import Services

    sent = client.post("/api/v1/run/team/greet", headers=api(), data={"init_params": '{"vars": {"author": "x"}}'},
                       files=[("files", ("gone.txt", b"soon gone\n"))])  # fmt: skip
    first = wait_ended(client, "team", "greet", sent.json()["trajectory_id"])
    storage = Services().storage
    (upload,) = first["init_params"]["file_paths"]
    storage.delete(posixpath.dirname(upload))  # the upload, and the run's own copy, are gone
    storage.delete(f"{first['storage_path']}/assets")
    form = client.get(f"/runs/{first['trajectory_id']}/again").text
    assert "gone.txt" in form and "no longer stored" in form and 'name="keep"' not in form
    refused = client.post(f"/runs/{first['trajectory_id']}/again",
                          data={"csrf": csrf_token(ADMIN), "var.author": "x", "keep": "gone.txt"},
                          follow_redirects=False)  # fmt: skip
    text = html.unescape(refused.text)
    assert refused.status_code == 422 and "'gone.txt' of run" in text and "attach it again" in text, text


def test_run_again_never_attaches_another_collections_file(client):
    """A record's file_paths are the run's own: one naming another collection's
    stored file, or climbing out with '..', is not attached again."""
    from pier.lifecycle.wiring import Services
    from pier.record import RunStatus, Trajectory

    client.post("/api/v1/collections", json={"name": "other"}, headers=api())
    services = Services()
    services.storage.put_bytes("other/.uploads/u1/secret.txt", b"other's secret\n")
    record = Trajectory.new(
        "d" * 32, "team", "greet",
        init_params={"vars": {"author": "x"}, "file_paths": ["other/.uploads/u1/secret.txt", "team/../other/.uploads/u1/secret.txt", ".."]},
    )  # fmt: skip
    record.finish(RunStatus.completed, record.created, 1.0)
    services.store.create_run(record)
    form = client.get(f"/runs/{record.trajectory_id}/again").text
    assert 'name="keep"' not in form and form.count("no longer stored") == 3, form
    refused = client.post(f"/runs/{record.trajectory_id}/again",
                          data={"csrf": csrf_token(ADMIN), "var.author": "x", "keep": "secret.txt"},
                          follow_redirects=False)  # fmt: skip
    assert refused.status_code == 422


def test_run_again_carries_a_changed_image_and_snapshot_to_the_new_run(client):
    """Every FORM_FIELD round-trips: the form shows the run's image and
    snapshot, and the ones typed in instead are the new run's."""
    sent = client.post("/api/v1/run/team/greet", headers=api(),
                       json={"init_params": {"vars": {"author": "ada"}, "image": "pier-base:bookworm", "snapshot": ""}})  # fmt: skip
    assert sent.status_code == 200, sent.text
    first = wait_ended(client, "team", "greet", sent.json()["trajectory_id"])
    form = client.get(f"/runs/{first['trajectory_id']}/again").text
    assert 'name="image" value="pier-base:bookworm"' in form
    tid = again(client, first["trajectory_id"],
                **{"var.author": "ada", "image": "pier-test-changed:2", "snapshot": "prepared"})  # fmt: skip
    second = wait_ended(client, "team", "greet", tid)
    assert second["init_params"]["image"] == "pier-test-changed:2", second["init_params"]
    assert second["init_params"]["snapshot"] == "prepared", second["init_params"]
    form = client.get(f"/runs/{tid}/again").text  # and its own form shows them
    assert 'name="image" value="pier-test-changed:2"' in form and 'name="snapshot" value="prepared"' in form


def keep_box(html: str) -> str:
    found = re.search(r'<input id="field-keep_sandbox"[^>]*>', html)
    assert found, html
    return found.group(0)


def test_the_run_form_keeps_the_sandbox_when_asked_and_run_again_carries_it(client):
    form = client.get("/tasks/team/greet").text
    assert "Keep the sandbox after the run" in form and " checked" not in keep_box(form)
    sent = client.post("/tasks/team/greet/run", data={"csrf": csrf_token(ADMIN), "var.author": "ada", "keep_sandbox": "true"},
                       follow_redirects=False)  # fmt: skip
    assert sent.status_code == 303, sent.text
    tid = sent.headers["location"].rsplit("/", 1)[-1]
    first = wait_ended(client, "team", "greet", tid)
    assert first["init_params"]["keep_sandbox"] is True, first["init_params"]
    assert first["steps"]["run"]["outputs"]["sandbox"]["kept_until"], first["steps"]["run"]["outputs"]
    form = client.get(f"/runs/{tid}/again").text
    assert " checked" in keep_box(form)  # the run kept it: so does its form
    second = wait_ended(
        client, "team", "greet", again(client, tid, **{"var.author": "ada", "keep_sandbox": "true"})
    )
    assert second["init_params"]["keep_sandbox"] is True
    third = wait_ended(client, "team", "greet", again(client, tid, **{"var.author": "ada"}))  # unchecked
    assert "keep_sandbox" not in third["init_params"], third["init_params"]
    assert not third["steps"]["run"]["outputs"]["sandbox"].get("kept_until")
    assert " checked" not in keep_box(client.get(f"/runs/{third['trajectory_id']}/again").text)


def test_a_keep_sandbox_that_is_not_a_boolean_is_refused_in_the_plans_words(client):
    import html

    sent = client.post("/tasks/team/greet/run", data={"csrf": csrf_token(ADMIN), "var.author": "ada", "keep_sandbox": "yes"},
                       follow_redirects=False)  # fmt: skip
    assert sent.status_code == 422, sent.text
    api_sent = client.post("/api/v1/run/team/greet", headers=api(),
                           json={"init_params": {"vars": {"author": "ada"}, "keep_sandbox": "yes"}})  # fmt: skip
    assert api_sent.status_code == 422, api_sent.text
    words = "keep_sandbox must be true or false, got 'yes'"
    assert words in html.unescape(sent.text) and words in api_sent.text, (sent.text, api_sent.text)


def test_run_again_of_a_continued_run_with_no_stored_task_does_not_claim_its_sandbox_again(client):
    """A `pier run --continue-from X --keep` stores no task: the new run runs its
    record's runbook and settings, but not its continue_from (X's sandbox is
    that run's); its keep is the task's own, and unchecking it says false."""
    from pier.lifecycle.wiring import Services
    from pier.record import RunStatus, Trajectory

    params = {
        "instruction": RUNBOOK,
        "vars": {"author": "x"},
        "continue_from": "a" * 32,
        "keep_sandbox": True,
    }
    record = Trajectory.new("e" * 32, "team", "cli-only", init_params=params)
    record.finish(RunStatus.completed, record.created, 1.0)
    Services().store.create_run(record)
    form = client.get(f"/runs/{record.trajectory_id}/again").text
    assert '<input type="hidden" name="keep_sandbox" value="false">' in form and " checked" in keep_box(form)
    tid = again(client, record.trajectory_id, **{"var.author": "x", "keep_sandbox": "false"})  # unchecked
    new = wait_ended(client, "team", "cli-only", tid)
    assert "continue_from" not in new["init_params"] and new["init_params"]["keep_sandbox"] is False, new
    assert new["status"] == "completed" and new["parent"] is None, new["error"]
