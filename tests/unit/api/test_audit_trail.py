"""The audit trail holds: a refused write is recorded even when the gate
refuses it before routing (a JSON body with a bad token), under its route;
entries name the object they are about and their outcome; a change made with
the CLI on the server's store is recorded; the entries are hash-chained, so a
changed or deleted row is detected (`pier audit verify`); retention pruning
keeps the chain checkable; the log exports as JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from pier.api.app import create_app
from pier.db import Store
from pier.settings import Settings, get_settings

ADMIN = "admin-token-for-the-trail"
FAKE = "tests.support.fleet_backend:backend"
PIER = [sys.executable, "-m", "pier.cli"]


@pytest.fixture
def client(pier_home, monkeypatch) -> Iterator[TestClient]:
    monkeypatch.setenv("PIER_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("PIER_SANDBOX_BACKEND", FAKE)
    monkeypatch.setenv("PIER_SWEEP_INTERVAL_SEC", "3600")
    get_settings.cache_clear()
    with TestClient(create_app(Settings())) as client:
        yield client


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN}"}


def entries(client: TestClient) -> list[dict]:
    response = client.get("/api/v1/audit", headers=admin(), params={"limit": 1000})
    assert response.status_code == 200, response.text
    return response.json()


def db_url(client: TestClient) -> str:
    return client.app.state.pier.settings.db_url


def test_a_refused_write_with_a_json_body_and_a_bad_token_is_audited_under_its_route(client):
    refused = client.post("/api/v1/run/team-a/t", headers={"Authorization": "Bearer stolen-or-guessed"},
                          json={"init_params": {"vars": {"x": "1"}}})  # fmt: skip
    assert refused.status_code == 401
    found = [e for e in entries(client) if e["action"] == "POST /api/v1/run/{collection}/{task}"]
    assert len(found) == 1, entries(client)
    assert found[0]["actor"] == "unknown-token" and found[0]["status"] == 401
    assert found[0]["outcome"] == "refused" and found[0]["collection"] == "team-a"
    metrics = client.get("/metrics", headers=admin()).text
    assert 'route="/api/v1/run/{collection}/{task}",status="401"' in metrics
    assert 'method="POST",route="unmatched"' not in metrics


def test_a_write_to_no_route_is_audited_too(client):
    assert client.post("/api/v1/nothing-here", json={}).status_code in (401, 404)
    (entry,) = [e for e in entries(client) if e["action"] == "POST unmatched"]
    assert entry["target"]["path"] == "/api/v1/nothing-here" and entry["actor"] == "anonymous"


def test_entries_name_their_object_and_outcome(client):
    made = client.post("/api/v1/collections", json={"name": "team-a"}, headers=admin())
    assert made.status_code == 201
    token = {"Authorization": f"Bearer {made.json()['token']}"}
    task = "---\nagent: script\nimage: pier-fake:latest\nsnapshot: ''\n---\n# t\n\n```bash\necho hi\n```\n"
    assert client.put("/api/v1/tasks/team-a/t", content=task, headers={**token, "Content-Type": "text/markdown"}
                      ).status_code == 200  # fmt: skip
    run = client.post("/api/v1/run/team-a/t", headers=token, json={})
    assert run.status_code == 200, run.text
    tid = run.json()["trajectory_id"]
    by_action = {e["action"]: e for e in entries(client)}
    assert by_action["POST /api/v1/collections"]["object_id"] == "team-a"
    assert by_action["PUT /api/v1/tasks/{collection}/{task}"]["object_id"] == "t"
    started = by_action["POST /api/v1/run/{collection}/{task}"]
    assert started["object_id"] == tid and started["outcome"] == "ok" and started["source"] == "api"
    assert started["request_id"] == run.headers["x-request-id"]  # joins the request's log lines


def tamper(url: str, sql: str) -> None:
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(sql))
    engine.dispose()


def verify(url: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIER_")}
    env.update(PIER_HOME=str(home), PIER_DATABASE_URL=url, PIER_RESIDENT="0")
    return subprocess.run([*PIER, "audit", "verify"], env=env, capture_output=True, text=True, timeout=60)


def test_a_changed_row_is_detected(client, tmp_path):
    for name in ("team-a", "team-b", "team-c"):
        client.post("/api/v1/collections", json={"name": name}, headers=admin())
    url = db_url(client)
    assert verify(url, tmp_path).returncode == 0
    victim = entries(client)[1]["id"]
    tamper(url, f"UPDATE audit_events SET actor = 'someone-else' WHERE id = {victim}")
    done = verify(url, tmp_path)
    assert done.returncode == 1
    assert f"entry {victim} was changed" in done.stdout


def test_a_deleted_row_is_detected(client, tmp_path):
    for name in ("team-a", "team-b", "team-c"):
        client.post("/api/v1/collections", json={"name": name}, headers=admin())
    url = db_url(client)
    ids = sorted(e["id"] for e in entries(client))
    tamper(url, f"DELETE FROM audit_events WHERE id = {ids[1]}")
    done = verify(url, tmp_path)
    assert done.returncode == 1 and f"missing between {ids[0]} and {ids[2]}" in done.stdout
    tamper(url, f"DELETE FROM audit_events WHERE id = {ids[0]}")  # the oldest, with no prune to say so
    assert "entries before" in verify(url, tmp_path).stdout


def test_the_cli_records_its_changes_on_the_servers_store(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIER_")}
    env.update(PIER_HOME=str(tmp_path), PIER_RESIDENT="0")
    done = subprocess.run([*PIER, "collection", "create", "ops-team"], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    with Store.open(f"sqlite:///{tmp_path / 'pier.db'}") as store:
        (entry,) = store.list_audit(limit=10)
    assert entry.action == "cli collection create" and entry.object_id == "ops-team"
    assert entry.actor.startswith("cli:") and entry.source == "cli" and entry.outcome == "ok"
    exported = subprocess.run([*PIER, "audit", "export"], env=env, capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [line["action"] for line in lines] == ["cli collection create"]
    assert lines[0]["entry_hash"] and lines[0]["prev_hash"] == ""


def test_deleting_the_newest_rows_is_detected_by_verify(client, pier_home, tmp_path):
    """On main, deleting the newest entries left a shorter chain that verified."""
    for name in ("team-a", "team-b", "team-c", "team-d"):
        client.post("/api/v1/collections", json={"name": name}, headers=admin())
    url = db_url(client)
    exported = subprocess.run([*PIER, "audit", "export", "--output", str(tmp_path / "kept.jsonl")],
                              env={**os.environ, "PIER_DATABASE_URL": url}, capture_output=True, text=True,
                              timeout=60)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    clean = verify(url, pier_home)
    assert clean.returncode == 0 and "audit log intact: 4 chained entries" in clean.stdout, clean.stdout
    ids = sorted(e["id"] for e in entries(client))
    tamper(url, f"DELETE FROM audit_events WHERE id >= {ids[2]}")
    done = verify(url, pier_home)
    assert done.returncode == 1
    assert f"the chain ends at entry {ids[1]}" in done.stdout and f"records entry {ids[3]}" in done.stdout
    elsewhere = tmp_path / "other-home"  # another machine: no head here, but the export kept elsewhere
    against = subprocess.run([*PIER, "audit", "verify", "--against", str(tmp_path / "kept.jsonl")],
                             env={**os.environ, "PIER_HOME": str(elsewhere), "PIER_DATABASE_URL": url},
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert against.returncode == 1, against.stdout
    assert f"2 exported entries are missing from the database: {ids[2]}, {ids[3]}" in against.stdout


def test_export_follows_new_entries_to_syslog_over_udp(tmp_path):
    """`pier audit export --syslog 127.0.0.1:PORT --follow` sends each entry as
    one datagram to a real UDP listener (a SIEM's syslog input), the ones
    written before it started and one written while it follows."""
    import socket
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("PIER_")}
    env.update(PIER_HOME=str(tmp_path), PIER_RESIDENT="0")

    def create(name: str) -> None:
        done = subprocess.run([*PIER, "collection", "create", name], env=env, capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr

    create("before-export")
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(30)
    port = listener.getsockname()[1]
    follower = subprocess.Popen([*PIER, "audit", "export", "--syslog", f"127.0.0.1:{port}", "--follow",
                                 "--poll", "0.2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        first = listener.recv(65536).decode()
        create("while-following")
        second = listener.recv(65536).decode()
        time.sleep(0.5)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.recv(65536)  # one datagram per entry, nothing twice
    finally:
        follower.terminate()
        follower.wait(timeout=30)
        listener.close()
    for datagram, name in ((first, "before-export"), (second, "while-following")):
        assert datagram.startswith("<") and "pier-audit: " in datagram, datagram  # syslog's <PRI> and tag
        entry = json.loads(datagram.split("pier-audit: ", 1)[1].rstrip("\x00"))
        assert (entry["action"], entry["object_id"]) == ("cli collection create", name) and entry[
            "entry_hash"
        ]
