"""Routes that need no sandbox: docs, auth, collections, environment, tasks, and
every refusal (401/403/404/413/422) with a message that says what to do."""

from __future__ import annotations

import subprocess
import sys
import uuid

import httpx
import pytest
from cryptography.fernet import Fernet
from tests.support.api_server import ADMIN_TOKEN, UPLOAD_LIMIT, Collection, make_collection, runbook

from pier.db import Store

pytestmark = pytest.mark.integration

ROUTES = [
    "/api/v1/collections",
    "/api/v1/collections/{collection}/tokens",
    "/api/v1/collections/{collection}/environment",
    "/api/v1/tasks/{collection}/{task}",
    "/api/v1/tasks/{collection}",
    "/api/v1/run/{collection}/{task}",
    "/api/v1/run-sync/{collection}/{task}",
    "/api/v1/trajectory/{collection}/{task}/statuses",
    "/api/v1/db/trajectory/{collection}/{task}/{trajectory_id}",
    "/api/v1/db/trajectories/{collection}/{task}",
    "/api/v1/trajectory/{collection}/{task}/{trajectory_id}/download",
    "/api/v1/sandbox/upload",
    "/api/v1/file/{path}",
    "/api/v1/runs/{trajectory_id}/events",
]


def test_health_docs_and_schema_need_no_token(server):
    anonymous = server.client(token=None)
    assert anonymous.get("/health").json()["status"] == "ok"
    assert "swagger" in anonymous.get("/docs").text.lower()
    schema = anonymous.get("/openapi.json").json()
    assert set(ROUTES) <= set(schema["paths"])
    run = schema["paths"]["/api/v1/run/{collection}/{task}"]["post"]
    assert {"application/json", "multipart/form-data"} <= set(run["requestBody"]["content"])
    task = schema["paths"]["/api/v1/tasks/{collection}/{task}"]["put"]
    assert {"application/json", "text/markdown"} <= set(task["requestBody"]["content"])
    assert {"WorkflowResponse", "Trajectory", "TrajectoryPage", "TaskPublic", "ErrorBody"} <= set(
        schema["components"]["schemas"]
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/collections"),
        ("GET", "/api/v1/collections/{c}/environment"),
        ("PATCH", "/api/v1/collections/{c}/environment"),
        ("PUT", "/api/v1/tasks/{c}/t"),
        ("GET", "/api/v1/tasks/{c}/t"),
        ("POST", "/api/v1/run/{c}/t"),
        ("POST", "/api/v1/run-sync/{c}/t"),
        ("POST", "/api/v1/trajectory/{c}/t/statuses"),
        ("GET", "/api/v1/db/trajectory/{c}/t/x"),
        ("GET", "/api/v1/db/trajectories/{c}/t"),
        ("GET", "/api/v1/trajectory/{c}/t/x/download"),
        ("POST", "/api/v1/sandbox/upload"),
        ("GET", "/api/v1/file/{c}/x"),
        ("GET", "/api/v1/runs/x/events"),
    ],
)
def test_missing_or_wrong_token_is_401(server, collection: Collection, method, path):
    url = path.format(c=collection.name)
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"}):
        r = httpx.request(method, server.url + url, headers=headers, timeout=30)
        assert r.status_code == 401, (headers, r.text)
        assert "token" in r.json()["detail"]
        assert r.headers["www-authenticate"] == "Bearer"


def test_another_collections_token_is_403(server, collection: Collection, base_image):
    other = make_collection(server, base_image)
    collection.put_task("t", "echo hi > {{results_dir}}/x")
    c = other.client()
    name = collection.name
    for method, url, kwargs in [
        ("GET", f"/api/v1/collections/{name}/environment", {}),
        ("PATCH", f"/api/v1/collections/{name}/environment", {"json": {"environment_variables": {"A": "b"}}}),
        ("PUT", f"/api/v1/tasks/{name}/t", {"json": {"init_params": {}}}),
        ("GET", f"/api/v1/tasks/{name}/t", {}),
        ("GET", f"/api/v1/tasks/{name}", {}),
        ("POST", f"/api/v1/run/{name}/t", {"json": {}}),
        ("POST", f"/api/v1/run-sync/{name}/t", {"json": {}}),
        ("POST", f"/api/v1/trajectory/{name}/t/statuses", {"json": {"x": "cancelled"}}),
        ("GET", f"/api/v1/db/trajectory/{name}/t/x", {}),
        ("GET", f"/api/v1/db/trajectories/{name}/t", {}),
        ("GET", f"/api/v1/trajectory/{name}/t/x/download", {}),
        ("POST", f"/api/v1/sandbox/upload?collection={name}", {"files": {"files": ("a.txt", b"a")}}),
    ]:
        r = c.request(method, url, **kwargs)
        assert r.status_code == 403, (method, url, r.text)
        assert "does not grant" in r.json()["detail"]
    # a collection token sees only its own collection; admin-only routes refuse it
    assert [x["name"] for x in c.get("/api/v1/collections").json()] == [other.name]
    assert c.get(f"/api/v1/collections/{name}").status_code == 403
    assert c.post("/api/v1/collections", json={"name": "x-" + name}).status_code == 403
    assert c.post(f"/api/v1/collections/{other.name}/tokens").status_code == 403


def test_collections_admin(server, base_image):
    admin = server.client()
    made = make_collection(server, base_image)
    again = admin.post("/api/v1/collections", json={"name": made.name})
    assert again.status_code == 409 and "tokens" in again.json()["detail"]
    assert made.name in [c["name"] for c in admin.get("/api/v1/collections").json()]
    assert admin.get(f"/api/v1/collections/{made.name}").json()["name"] == made.name
    second = admin.post(f"/api/v1/collections/{made.name}/tokens")
    assert second.status_code == 201
    assert server.client(second.json()["token"]).get(f"/api/v1/tasks/{made.name}").status_code == 200
    bad = admin.post("/api/v1/collections", json={"name": "../evil"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "name"
    assert admin.get("/api/v1/tasks/no-such-collection").status_code == 404


def test_cli_creates_collection_and_pushes_task(server, tmp_path, base_image):
    env = server.env()
    name = f"cli-{uuid.uuid4().hex[:10]}"
    made = subprocess.run(
        [sys.executable, "-m", "pier.cli", "collection", "create", name],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("pier_") and "shown only this once" in made.stderr
    folder = tmp_path / "greet"
    folder.mkdir()
    (folder / "RUNBOOK.md").write_text(runbook("echo hi > {{results_dir}}/x", snapshot="", image=base_image))
    pushed = subprocess.run(
        [sys.executable, "-m", "pier.cli", "task", "push", str(folder), "--collection", name],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr
    got = server.client(token).get(f"/api/v1/tasks/{name}/greet")
    assert got.status_code == 200 and got.json()["workflow"]["init_params"]["agent"] == "script"
    with Store.open(server.db_url) as store:  # only the token's hash is stored
        assert store.collection_for_token_hash(token) is None
    bad = subprocess.run(
        [sys.executable, "-m", "pier.cli", "task", "push", str(folder), "--collection", "no-such-" + name],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert bad.returncode != 0 and "not found" in bad.stderr


def test_environment_is_write_only_and_encrypted_at_rest(server, collection: Collection):
    c = collection.client()
    url = f"/api/v1/collections/{collection.name}/environment"
    r = c.patch(url, json={"environment_variables": {"API_KEY": "v-secret-1", "OTHER": "v-secret-2"}})
    assert r.status_code == 200, r.text
    assert r.json()["names"] == ["API_KEY", "OTHER"]
    assert "v-secret" not in c.get(url).text
    r = c.patch(url, json={"environment_variables": {"OTHER": None, "THIRD": "v3"}})
    assert r.json()["names"] == ["API_KEY", "THIRD"]
    with Store.open(server.db_url) as store:
        stored = store.get_env_encrypted(collection.name)
    assert "v-secret-1" not in stored["API_KEY"]
    key = (server.home / "secret.key").read_bytes()
    assert Fernet(key).decrypt(stored["API_KEY"].encode()) == b"v-secret-1"
    bad = c.patch(url, json={"environment_variables": {"1BAD-NAME": "x"}})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "environment_variables.1BAD-NAME"
    bad = c.patch(url, json={"environment_variables": {"A": 5}})
    assert bad.status_code == 422 and "environment_variables" in bad.json()["errors"][0]["field"]


def test_tasks_json_and_markdown(collection: Collection, base_image):
    c = collection.client()
    base = f"/api/v1/tasks/{collection.name}"
    task = {
        "init_params": {
            "instruction": runbook("echo hi"),
            "agent": "script",
            "snapshot": "",
            "image": base_image,
        },
        "steps": ["run"],
        "step_configs": {"run": {"activity": "runbook", "cpus": 1, "memory": "512M"}},
    }
    r = c.put(f"{base}/from-json", json=task)
    assert r.status_code == 200, r.text
    got = c.get(f"{base}/from-json").json()
    assert got["workflow"]["init_params"] == task["init_params"]
    assert got["workflow"]["step_configs"]["run"]["memory"] == "512M"
    r = c.put(
        f"{base}/from-md", content=runbook("echo hi", model="x"), headers={"Content-Type": "text/markdown"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["workflow"]["init_params"]["instruction"].startswith("---")
    assert sorted(t["name"] for t in c.get(base).json()) == ["from-json", "from-md"]
    assert c.get(f"{base}/missing").status_code == 404


@pytest.mark.parametrize(
    ("body", "content_type", "field"),
    [
        ({"init_params": {}, "steps": ["other"]}, None, "steps"),
        ({"init_params": [], "steps": ["run"]}, None, "init_params"),
        ({"init_params": {}, "bogus": 1}, None, "bogus"),
        (
            {"step_configs": {"run": {"memory": "lots"}}, "init_params": {"instruction": "x"}},
            None,
            "step_configs.run.memory",
        ),
        ("{not json", "application/json", "body"),
    ],
)
def test_bad_task_is_422_naming_the_field(collection: Collection, body, content_type, field):
    c = collection.client()
    kwargs = (
        {"json": body}
        if content_type is None
        else {"content": body, "headers": {"Content-Type": content_type}}
    )
    r = c.put(f"/api/v1/tasks/{collection.name}/bad", **kwargs)
    assert r.status_code == 422, r.text
    assert field in [e["field"] for e in r.json()["errors"]], r.json()


def test_bad_runbook_task_is_422_with_the_reason(collection: Collection):
    c = collection.client()
    url = f"/api/v1/tasks/{collection.name}/bad"
    md = {"Content-Type": "text/markdown"}
    r = c.put(url, content="---\nagent: [unclosed\n---\nbody\n", headers=md)
    assert r.status_code == 422 and "bad:" in r.json()["detail"]
    r = c.put(url, content=runbook("echo", agent="no-such-agent"), headers=md)
    assert r.status_code == 422 and "no-such-agent" in r.json()["detail"]
    r = c.put(f"/api/v1/tasks/{collection.name}/.hidden", content=runbook("echo"), headers=md)
    assert r.status_code == 422 and "task name" in r.json()["detail"]


def test_run_input_errors(collection: Collection):
    collection.put_task("t", "echo hi > {{results_dir}}/x", secrets={"NEEDED": {"required": True}})
    c = collection.client()
    url = f"/api/v1/run/{collection.name}/t"
    cases = [
        ({"json": {"init_params": []}}, 422, "init_params"),
        ({"json": {"init_params": {}, "extra": 1}}, 422, "extra"),
        ({"content": b"{oops", "headers": {"Content-Type": "application/json"}}, 422, "body"),
        ({"data": {"init_params": "{oops"}, "files": {"files": ("a.txt", b"a")}}, 422, "init_params"),
        ({"json": {"secret_params": {"NEEDED": 5}}}, 422, "secret_params.NEEDED"),
    ]
    for kwargs, status, field in cases:
        r = c.post(url, **kwargs)
        assert r.status_code == status, (kwargs, r.text)
        assert field in [e["field"] for e in r.json()["errors"]], r.json()
    r = c.post(url, json={})
    assert r.status_code == 422 and "NEEDED" in r.json()["detail"] and "environment" in r.json()["detail"]
    ok = {"secret_params": {"NEEDED": "yes"}}
    r = c.post(url, json={**ok, "init_params": {"file_paths": ["/etc/passwd"]}})
    assert r.status_code == 422 and "upload" in r.json()["detail"]
    r = c.post(url, json={**ok, "webhook_url": "ftp://x"})
    assert r.status_code == 422 and "webhook_url" in r.json()["detail"]
    r = c.post(url, content=b"x", headers={"Content-Type": "text/csv"})
    assert r.status_code == 415
    assert c.post(f"/api/v1/run/{collection.name}/no-such-task", json={}).status_code == 404
    assert c.get(f"/api/v1/db/trajectory/{collection.name}/t/no-such-run").status_code == 404
    assert c.get("/api/v1/runs/no-such-run/events").status_code == 404
    r = c.post(f"/api/v1/trajectory/{collection.name}/t/statuses", json={"x": "running"})
    assert r.status_code == 422
    page = c.get(f"/api/v1/db/trajectories/{collection.name}/t", params={"limit": 0})
    assert page.status_code == 422 and page.json()["errors"][0]["field"] == "query.limit"


def test_unknown_route_says_where_the_docs_are(server):
    r = server.client().get("/api/v1/nope")
    assert r.status_code == 404 and "/docs" in r.json()["detail"]


def test_oversize_bodies_are_413(collection: Collection):
    c = collection.client()
    big = b"x" * (UPLOAD_LIMIT + 1)
    r = c.post("/api/v1/sandbox/upload", files={"files": ("big.bin", big)})
    assert r.status_code == 413 and "PIER_MAX_UPLOAD_BYTES" in r.json()["detail"]

    def chunked():  # no Content-Length: the limit is enforced while reading
        for _ in range(UPLOAD_LIMIT // 65536 + 2):
            yield b"y" * 65536

    r = c.post(
        f"/api/v1/run/{collection.name}/t", content=chunked(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413, r.text
    small = c.post("/api/v1/sandbox/upload", files={"files": ("ok.bin", b"z" * 1000)})
    assert small.status_code == 200


def test_file_route_never_leaves_the_collection(server, collection: Collection, base_image):
    c = collection.client()
    up = c.post(
        "/api/v1/sandbox/upload", files=[("files", ("a.txt", b"alpha")), ("files", ("b.bin", b"\x00\x01"))]
    )
    assert up.status_code == 200, up.text
    body = up.json()
    assert body["count"] == 2 and body["file_paths"][0].startswith(f"{collection.name}/.uploads/")
    assert c.get(f"/api/v1/file/{body['file_paths'][0]}").content == b"alpha"
    other = make_collection(server, base_image)
    other_up = other.client().post("/api/v1/sandbox/upload", files={"files": ("o.txt", b"other")}).json()
    folder = server.home / "storage" / collection.name
    (folder / "escape").symlink_to("/etc/passwd")
    (server.home / "outside.txt").write_text("outside")
    attempts = [
        other_up["file_paths"][0],  # another collection's file
        f"{collection.name}/../{other_up['file_paths'][0]}",
        f"{collection.name}/%2e%2e/{other_up['file_paths'][0]}",
        f"{collection.name}/..%2F..%2Foutside.txt",
        f"{collection.name}/../../outside.txt",
        f"{collection.name}/escape",
        "%2Fetc%2Fpasswd",
        f"{collection.name}/%00",
        f"{collection.name}/.uploads",
        "..%2F..%2F..%2Fetc%2Fpasswd",
    ]
    for path in attempts:
        r = httpx.get(
            f"{server.url}/api/v1/file/{path}", headers={"Authorization": f"Bearer {collection.token}"}
        )
        assert r.status_code == 404, (path, r.status_code, r.text)
        assert "other" not in r.text and "root:" not in r.text
    # even the admin, who may read every collection, stays inside the storage folder
    for path in ("..%2Foutside.txt", "%2e%2e/outside.txt", f"{collection.name}/escape"):
        r = httpx.get(f"{server.url}/api/v1/file/{path}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert r.status_code == 404, (path, r.text)


def test_file_keys_stay_in_the_collection_on_every_storage(storage_server, stored_collection, base_image):
    """On S3 a key is any string: '..' and friends must mean nothing there either."""
    collection, c = stored_collection, stored_collection.client()
    mine = c.post("/api/v1/sandbox/upload", files={"files": ("a.txt", b"alpha")}).json()["file_paths"][0]
    other = make_collection(storage_server, base_image)
    theirs = other.client().post("/api/v1/sandbox/upload", files={"files": ("o.txt", b"other")}).json()
    (their_path,) = theirs["file_paths"]
    assert c.get(f"/api/v1/file/{mine}").content == b"alpha"
    for path in (
        their_path,
        f"{collection.name}/../{their_path}",
        f"{collection.name}/%2e%2e/{their_path}",
        f"{collection.name}/.%2F..%2F{their_path}",
        f"{collection.name}//{mine.split('/', 1)[1]}",
        f"{collection.name}/.uploads",
        f"{collection.name}/%00",
    ):
        r = c.get(f"/api/v1/file/{path}")
        assert r.status_code == 404 and "other" not in r.text, (path, r.status_code, r.text)
    assert c.get(f"/api/v1/trajectory/{collection.name}/t/{'0' * 32}/download").status_code == 404


def test_upload_refuses_bad_names_and_admin_must_name_a_collection(server, collection: Collection):
    c = collection.client()
    r = c.post("/api/v1/sandbox/upload", files=[("files", ("same.txt", b"1")), ("files", ("same.txt", b"2"))])
    assert r.status_code == 422 and "same.txt" in r.json()["detail"]
    r = c.post("/api/v1/sandbox/upload", files={"files": ("../../x.txt", b"1")})
    assert r.status_code == 200 and r.json()["file_paths"][0].endswith("/x.txt")
    admin = server.client()
    r = admin.post("/api/v1/sandbox/upload", files={"files": ("a.txt", b"1")})
    assert r.status_code == 422 and "collection" in r.json()["detail"]
    r = admin.post(f"/api/v1/sandbox/upload?collection={collection.name}", files={"files": ("a.txt", b"1")})
    assert r.status_code == 200
    r = c.post("/api/v1/sandbox/upload", data={"x": "1"}, files={"attachment": ("a.txt", b"1")})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "files"
    assert c.post("/api/v1/sandbox/upload", data={"x": "1"}).status_code == 415


def test_nul_characters_and_overlong_names_are_refused(collection: Collection):
    """Nothing stored can hold a NUL (PostgreSQL text cannot): refused up front, never a 500."""
    collection.put_task("t", "echo hi > {{results_dir}}/x")
    c = collection.client()
    name = collection.name
    assert c.get(f"/api/v1/db/trajectory/{name}/t/a%00b").status_code == 404
    assert c.get(f"/api/v1/db/trajectories/{name}/t?x=%00").status_code == 422
    r = c.post(f"/api/v1/run/{name}/t", json={"init_params": {"vars": {"x": "a\u0000b"}}})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "init_params.vars.x"
    r = c.post(f"/api/v1/trajectory/{name}/t/statuses", json={"a\u0000": "cancelled"})
    assert r.status_code == 422
    # every JSON body, whatever its route: a score name in an ingest (a 500 on PostgreSQL once)
    r = c.post(
        f"/api/v1/trajectories/{name}/t/ingest", json={"status": "completed", "scores": {"a\u0000b": 1}}
    )
    assert r.status_code == 422 and r.json()["errors"] == [
        {"field": "scores.a\\0b", "message": "must not contain a NUL character or an unpaired surrogate"}
    ]
    lone_surrogate = '{"status": "completed", "output": {"x": "\\ud800"}}'  # JSON may spell one; UTF-8 cannot
    r = c.post(
        f"/api/v1/trajectories/{name}/t/ingest",
        content=lone_surrogate,
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "output.x"
    r = c.put(
        f"/api/v1/tasks/{name}/t",
        content="---\nagent: script\n---\n\u0000",
        headers={"Content-Type": "text/markdown"},
    )
    assert r.status_code == 422
    r = c.put(
        f"/api/v1/tasks/{name}/{'n' * 200}",
        content=runbook("echo"),
        headers={"Content-Type": "text/markdown"},
    )
    assert r.status_code == 422 and "at most" in r.json()["detail"]
    r = c.post("/api/v1/sandbox/upload", files={"files": ("f" * 300, b"x")})
    assert r.status_code == 422 and "255" in r.json()["detail"]
    r = c.get("/api/v1/runs/x/events", headers={"Last-Event-ID": str(2**70)})
    assert r.status_code == 404  # no such run; the huge id itself is no error


def test_a_value_that_would_steer_a_generated_dockerfile_is_422(collection: Collection):
    """The build grammar, at the API: a stored task and a run's init_params."""
    c = collection.client()
    md = {"Content-Type": "text/markdown"}
    r = c.put(f"/api/v1/tasks/{collection.name}/steer", headers=md,
              content=runbook("echo", pip_packages=["six>=\nRUN\t,>=1"]))  # fmt: skip
    assert r.status_code == 422 and "pip_packages" in r.json()["detail"], r.text
    collection.put_task("fine", "echo hi > {{results_dir}}/x")
    for params, field in (({"apt_packages": ["jq\u2028RUN id"]}, "apt_packages"),
                          ({"base_image": "debian:bookworm\nRUN id"}, "base_image")):  # fmt: skip
        r = c.post(f"/api/v1/run/{collection.name}/fine", json={"init_params": params})
        assert r.status_code == 422 and field in r.json()["detail"], r.text
