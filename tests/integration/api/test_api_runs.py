"""Runs through the API on the real engine: records, uploads and downloads,
secrets, live logs, cancel, the concurrency limit, paging and webhooks."""

from __future__ import annotations

import io
import json
import os
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from tests.support.api_server import SLOTS, Collection

from pier.db import Store
from pier.policies.webhooks import SIGNATURE_HEADER, verify

pytestmark = pytest.mark.integration


def sse_events(response: httpx.Response) -> list[dict]:
    """Parse a text/event-stream into [{id, event, data}] until it ends."""
    events, current = [], {}
    for line in response.iter_lines():
        if not line:
            if "event" in current:
                events.append(current)
            current = {}
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(": ")
        current[key] = json.loads(value) if key == "data" else value
    return events


def follow(collection: Collection, trajectory_id: str, **kwargs) -> list[dict]:
    with collection.client() as c, c.stream("GET", f"/api/v1/runs/{trajectory_id}/events", **kwargs) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        return sse_events(r)


def test_run_json_then_run_sync(stored_collection: Collection):
    collection = stored_collection
    collection.put_task("hello", "echo hello {{who}} | tee {{results_dir}}/hello.txt", vars={"who": "nobody"})
    with collection.client() as c:
        accepted = c.post(
            f"/api/v1/run/{collection.name}/hello", json={"init_params": {"vars": {"who": "api"}}}
        )
    assert accepted.status_code == 200, accepted.text
    body = accepted.json()
    tid = body["trajectory_id"]
    assert body["status"] == "pending" and body["workflow_id"] == f"{collection.name}-hello--{tid}"
    record = collection.wait("hello", tid)
    assert record["status"] == "completed" and record["steps"]["run"]["outputs"]["success"] is True, record[
        "error"
    ]
    assert record["workflow_id"] == body["workflow_id"]
    outputs = record["steps"]["run"]["outputs"]
    assert [f["path"] for f in outputs["results_files"]] == ["hello.txt"]
    assert outputs["results_files"][0]["content_type"] == "text/plain"
    assert all(s["started"] and s["ended"] for s in outputs["stages"] if s["status"] == "completed")
    assert record["init_params"]["vars"] == {"who": "api"}
    with collection.client() as c:
        synced = c.post(f"/api/v1/run-sync/{collection.name}/hello", json={})
        assert synced.status_code == 200, synced.text
        assert synced.json()["status"] == "completed" and synced.json()["result"]["success"] is True
        out = c.get(
            f"/api/v1/file/{collection.name}/hello/{synced.json()['trajectory_id']}/results/hello.txt"
        )
        listed = c.get(f"/api/v1/db/trajectories/{collection.name}/hello").json()
    assert out.status_code == 200 and out.text == "hello nobody\n"
    assert out.headers["content-type"].startswith("text/plain")
    assert out.headers["content-disposition"] == 'attachment; filename="hello.txt"'
    assert listed["total"] == 2 and {t["trajectory_id"] for t in listed["trajectories"]} == {
        tid,
        synced.json()["trajectory_id"],
    }


def test_upload_run_download_returns_the_same_bytes(stored_collection: Collection):
    collection = stored_collection
    payload = os.urandom(300_000)
    collection.put_task("copy", "cp /app/assets/data.bin {{results_dir}}/copy.bin")
    with collection.client() as c:
        up = c.post("/api/v1/sandbox/upload", files={"files": ("data.bin", payload)})
        assert up.status_code == 200, up.text
        tid = collection.run("copy", init_params={"file_paths": up.json()["file_paths"]})
        record = collection.wait("copy", tid)
        assert record["status"] == "completed", record["error"]
        zipped = c.get(f"/api/v1/trajectory/{collection.name}/copy/{tid}/download")
    assert zipped.status_code == 200 and zipped.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(zipped.content))
    assert archive.read("results/copy.bin") == payload
    assert archive.read("assets/data.bin") == payload
    assert json.loads(archive.read("run.json"))["status"] == "completed"


def test_multipart_files_secret_params_and_collection_env(storage_server, stored_collection: Collection):
    server, collection = storage_server, stored_collection
    collection.put_task(
        "env",
        "ls /app/assets > {{results_dir}}/assets.txt\n"
        'echo "declared=${DECLARED:-unset} undeclared=${UNDECLARED:-unset} per_run=${PER_RUN:-unset}" '
        "| tee {{results_dir}}/env.txt",
        secrets={"DECLARED": {"required": True}},
    )
    with collection.client() as c:
        env = {"DECLARED": "from-collection-42", "UNDECLARED": "must-not-leak-43"}
        c.patch(f"/api/v1/collections/{collection.name}/environment", json={"environment_variables": env})
        r = c.post(
            f"/api/v1/run/{collection.name}/env",
            data={
                "init_params": json.dumps({"vars": {}}),
                "secret_params": json.dumps({"PER_RUN": "per-run-44"}),
            },
            files=[("files", ("a.txt", b"a")), ("files", ("b.txt", b"b"))],
        )
        assert r.status_code == 200, r.text
        tid = r.json()["trajectory_id"]
        record = collection.wait("env", tid)
        assert record["status"] == "completed", record["error"]
        base = f"/api/v1/file/{collection.name}/env/{tid}/results"
        assert c.get(f"{base}/assets.txt").text.split() == ["a.txt", "b.txt"]
        assert c.get(f"{base}/env.txt").text == (
            "declared=from-collection-42 undeclared=unset per_run=per-run-44\n"
        )
        log = [e["data"]["line"] for e in follow(collection, tid) if e["event"] == "log"]
    assert "declared=*** undeclared=unset per_run=***" in log
    stored = json.dumps(record) + json.dumps(log)
    assert "per-run-44" not in stored and "from-collection-42" not in stored
    with Store.open(server.db_url) as store:
        # kept only until the run ended: dropped by the run's end hook, just after
        # the record says completed (a webhook queued first)
        deadline = time.monotonic() + 10
        while store.run_request(tid) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert store.run_request(tid) is None


def test_sse_follows_live_and_replays_from_an_offset(collection: Collection):
    collection.put_task(
        "talk", "for i in 1 2 3 4 5; do echo line-$i; sleep 0.3; done\necho ok > {{results_dir}}/ok"
    )
    tid = collection.run("talk")
    live = follow(collection, tid)  # connected while the run is pending: follows to the end
    logs = [e for e in live if e["event"] == "log"]
    assert live[-1] == {"event": "end", "data": {"status": "completed"}}
    assert [int(e["id"]) for e in logs] == list(range(1, len(logs) + 1))
    assert [e["data"]["line"] for e in logs if e["data"]["line"].startswith("line-")] == [
        f"line-{i}" for i in range(1, 6)
    ]
    replay = follow(collection, tid, headers={"Last-Event-ID": "3"})
    assert [e["id"] for e in replay if e["event"] == "log"] == [e["id"] for e in logs[3:]]
    assert replay[-1]["event"] == "end"
    by_query = follow(collection, tid, params={"last_event_id": len(logs) - 1})
    assert [e["data"]["line"] for e in by_query if e["event"] == "log"] == [logs[-1]["data"]["line"]]


def test_cancel_a_running_run_deletes_its_sandbox(collection: Collection, docker_backend):
    collection.put_task("slow", "echo started\nsleep 300\necho never > {{results_dir}}/x")
    tid = collection.run("slow")
    collection.wait(
        "slow",
        tid,
        done=lambda r: (
            r["status"] == "running" and r["steps"]["run"]["outputs"]["stages"][3]["status"] == "running"
        ),
    )
    deadline = time.monotonic() + 30
    while not collection.sandboxes(docker_backend):
        assert time.monotonic() < deadline, "no sandbox appeared"
        time.sleep(0.2)
    with collection.client() as c:
        r = c.post(f"/api/v1/trajectory/{collection.name}/slow/statuses", json={tid: "cancelled"})
    assert r.status_code == 200 and r.json() == {tid: "cancelled"}, r.text
    # Well before the agent's `sleep 300` would end the run by itself.
    record = collection.wait("slow", tid, timeout=150)
    assert record["status"] == "cancelled" and record["steps"]["run"]["outputs"]["success"] is False
    assert "cancelled" in record["error"]
    assert not collection.sandboxes(docker_backend)
    with collection.client() as c:  # cancelling an ended run changes nothing
        again = c.post(f"/api/v1/trajectory/{collection.name}/slow/statuses", json={tid: "cancelled"})
    assert again.json() == {tid: "cancelled"}


def test_twenty_runs_four_at_a_time_and_paging(collection: Collection, docker_backend):
    collection.put_task("batch", "sleep 1\necho done > {{results_dir}}/done.txt")
    most, stop = [0], threading.Event()

    def watch() -> None:
        while not stop.is_set():
            most[0] = max(most[0], len(collection.sandboxes(docker_backend)))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(20) as pool:
            ids = list(pool.map(lambda _: collection.run("batch"), range(20)))
        records = [collection.wait("batch", tid, timeout=300) for tid in ids]
    finally:
        stop.set()
        watcher.join()
    assert [r["status"] for r in records] == ["completed"] * 20, [r["error"] for r in records]
    assert 2 <= most[0] <= SLOTS, f"saw {most[0]} sandboxes at once"
    pages = []
    with collection.client() as c:
        for page in (1, 2, 3, 4):
            r = c.get(f"/api/v1/db/trajectories/{collection.name}/batch", params={"limit": 7, "page": page})
            assert r.status_code == 200, r.text
            pages.append(r.json())
    assert [len(p["trajectories"]) for p in pages] == [7, 7, 6, 0]
    assert [p["has_more"] for p in pages] == [True, True, False, False]
    assert {p["total"] for p in pages} == {20} and {p["limit"] for p in pages} == {7}
    listed = [t["trajectory_id"] for p in pages for t in p["trajectories"]]
    assert sorted(listed) == sorted(ids)
    created = [t["created"] for p in pages for t in p["trajectories"]]
    assert created == sorted(created, reverse=True)


class Receiver(BaseHTTPRequestHandler):
    """Fails the first delivery, accepts the next: pier must retry."""

    received: list[tuple[dict, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), body))
        self.send_response(500 if len(type(self).received) == 1 else 204)
        self.end_headers()

    def log_message(self, *_args) -> None:
        return


def test_webhook_is_signed_and_retried(collection: Collection):
    Receiver.received = []
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        collection.put_task("hook", "echo hi > {{results_dir}}/hi.txt")
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        tid = collection.run("hook", init_params={"webhook_url": url, "webhook_secret": "whsec-abc"})
        collection.wait("hook", tid)
        deadline = time.monotonic() + 30
        while len(Receiver.received) < 2:
            assert time.monotonic() < deadline, f"{len(Receiver.received)} webhook deliveries"
            time.sleep(0.1)
    finally:
        receiver.shutdown()
    headers, body = Receiver.received[1]
    assert verify("whsec-abc", headers[SIGNATURE_HEADER], body)
    assert not verify("other-secret", headers[SIGNATURE_HEADER], body)
    sent = json.loads(body)
    assert sent["trajectory_id"] == tid and sent["status"] == "completed"
    assert "webhook_secret" not in json.dumps(sent) and "whsec-abc" not in json.dumps(
        collection.record("hook", tid)
    )
