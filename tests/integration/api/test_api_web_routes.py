"""The routes the web UI added for every client: runs across collections with
filters, token list and revoke, and the sign-in cookie (reads only)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from tests.support.api_server import Collection, make_collection

from pier.record import Label, RunStatus, Trajectory
from pier.store import Store

pytestmark = pytest.mark.integration
T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _insert(db_url: str, collection: str, specs: list[tuple[RunStatus, bool | None, int]]) -> list[str]:
    ids = []
    with Store.open(db_url) as store:
        for status, success, day in specs:
            record = Trajectory.new(uuid.uuid4().hex, collection, "t", created=T0 + timedelta(days=day))
            record.status, record.outputs.success = status, success
            store.create_run(record)
            ids.append(record.trajectory_id)
    return ids


def test_runs_across_collections_with_filters(server, collection: Collection, base_image):
    other = make_collection(server, base_image)
    done, failed, running = _insert(server.db_url, collection.name, [
        (RunStatus.completed, True, 0), (RunStatus.failed, False, 1), (RunStatus.running, None, 2)])  # fmt: skip
    (theirs,) = _insert(server.db_url, other.name, [(RunStatus.completed, True, 0)])
    with Store.open(server.db_url) as store:
        store.add_labels(failed, [Label(key="review", value="bad")])
    mine = collection.client()

    def ids(**params) -> list[str]:
        r = mine.get("/api/v1/runs", params=params)
        assert r.status_code == 200, r.text
        return [t["trajectory_id"] for t in r.json()["trajectories"]]

    assert ids() == [running, failed, done]  # its own collection only, newest first
    assert ids(success="true") == [done] and ids(success="false") == [failed]
    assert ids(status=["failed", "running"]) == [running, failed]
    assert ids(label="review=bad") == [failed]
    assert ids(since="2026-03-02T00:00:00", until="2026-03-03T00:00:00Z") == [failed]
    assert ids(task="nope") == []
    page = mine.get("/api/v1/runs", params={"limit": 2, "page": 2}).json()
    assert (page["total"], page["has_more"], len(page["trajectories"])) == (3, False, 1)
    refused = mine.get("/api/v1/runs", params={"collection": other.name})
    assert refused.status_code == 403 and "does not grant" in refused.json()["detail"]
    bad = mine.get("/api/v1/runs", params={"status": "nope"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "query.status.0"
    admin = server.client()
    assert [t["trajectory_id"] for t in admin.get("/api/v1/runs", params={"collection": other.name}).json()[
        "trajectories"]] == [theirs]  # fmt: skip
    everyone = admin.get("/api/v1/runs", params={"limit": 100}).json()["trajectories"]
    assert {theirs, done} <= {t["trajectory_id"] for t in everyone}


def test_tokens_are_listed_and_revoked_by_the_admin(server, collection: Collection):
    admin = server.client()
    issued = admin.post(f"/api/v1/collections/{collection.name}/tokens").json()["token"]
    assert server.client(issued).get(f"/api/v1/tasks/{collection.name}").status_code == 200  # now cached
    listed = admin.get(f"/api/v1/collections/{collection.name}/tokens").json()
    assert [t["label"] for t in listed] == ["created", "api"] and "token" not in listed[0]
    revoked = admin.delete(f"/api/v1/collections/{collection.name}/tokens/{listed[1]['id']}")
    assert revoked.status_code == 200
    assert server.client(issued).get(f"/api/v1/tasks/{collection.name}").status_code == 401  # at once
    assert collection.client().get(f"/api/v1/tasks/{collection.name}").status_code == 200  # the other stays
    again = admin.delete(f"/api/v1/collections/{collection.name}/tokens/{listed[1]['id']}")
    assert again.status_code == 404 and "list its tokens" in again.json()["detail"]
    assert collection.client().get(f"/api/v1/collections/{collection.name}/tokens").status_code == 403


def test_the_sign_in_cookie_reads_but_never_writes(server, collection: Collection):
    (tid,) = _insert(server.db_url, collection.name, [(RunStatus.completed, True, 0)])
    folder = server.home / "storage" / collection.name / "t" / tid / "results"
    folder.mkdir(parents=True)
    (folder / "page.html").write_text("<script>alert(1)</script>")
    jar = {"pier_session": collection.token}
    base = f"{server.url}/api/v1"
    assert httpx.get(f"{base}/db/trajectory/{collection.name}/t/{tid}", cookies=jar).status_code == 200
    served = httpx.get(f"{base}/file/{collection.name}/t/{tid}/results/page.html", cookies=jar)
    assert served.status_code == 200
    assert served.headers["content-security-policy"] == "sandbox"  # an agent's page cannot act as pier
    assert served.headers["x-content-type-options"] == "nosniff"
    label = httpx.post(f"{base}/trajectory/{collection.name}/t/{tid}/labels", json={"key": "k"}, cookies=jar)
    assert label.status_code == 401
    assert (
        httpx.get(
            f"{base}/db/trajectory/{collection.name}/t/{tid}", cookies={"pier_session": "x"}
        ).status_code
        == 401
    )
