"""Keep, continue and snapshot over the API (init_params.keep_sandbox,
init_params.continue_from, POST /api/v1/snapshot/...), from the caller's side:
the run's own collection token, and another collection's."""

from __future__ import annotations

import uuid

import pytest
from tests.support.api_server import make_collection

from pier.lifecycle.sessions import snapshot_ref

pytestmark = pytest.mark.integration

SETUP = "echo prepared > /app/state.txt\necho ok > {{results_dir}}/a.txt"
FOLLOW = "cat /app/state.txt > {{results_dir}}/seen.txt"


def test_keep_continue_and_snapshot_over_the_api(collection, server, base_image, docker_backend):
    collection.put_task("setup", SETUP)
    collection.put_task("follow", FOLLOW)
    first = collection.wait("setup", collection.run("setup", init_params={"keep_sandbox": True}))
    assert first["status"] == "completed", first["error"]
    kept = first["steps"]["run"]["outputs"]["sandbox"]
    assert kept["kept_until"] and kept["id"] in {s.id for s in collection.sandboxes(docker_backend)}
    stranger = make_collection(server, base_image)
    name = f"prep-{uuid.uuid4().hex[:6]}"
    try:
        with stranger.client() as c:  # another collection's token: the run is not found, nothing saved
            r = c.post(
                f"/api/v1/snapshot/{stranger.name}/{name}", json={"trajectory_id": first["trajectory_id"]}
            )
            assert r.status_code == 404, r.text
            r = c.post(
                f"/api/v1/snapshot/{collection.name}/{name}", json={"trajectory_id": first["trajectory_id"]}
            )
            assert r.status_code in (401, 403), r.text
        with collection.client() as c:
            r = c.post(
                f"/api/v1/snapshot/{collection.name}/{name}", json={"trajectory_id": first["trajectory_id"]}
            )
            assert r.status_code == 200, r.text
            image = r.json()["image"]
        second = collection.wait(
            "follow", collection.run("follow", init_params={"continue_from": first["trajectory_id"]})
        )
        assert second["status"] == "completed", second["error"]
        assert second["parent"] == first["trajectory_id"]
        with collection.client() as c:
            seen = c.get(f"/api/v1/file/{collection.name}/follow/{second['trajectory_id']}/results/seen.txt")
        assert seen.text == "prepared\n"
        again = collection.wait(
            "follow", collection.run("follow", init_params={"continue_from": first["trajectory_id"]})
        )
        assert again["status"] == "failed" and "in use by run" in again["error"]
        stranger.put_task("follow", FOLLOW)
        theirs = stranger.wait(
            "follow", stranger.run("follow", init_params={"snapshot": name, "image": None})
        )
        assert theirs["status"] == "failed", "another collection started from this collection's snapshot"
        assert theirs["steps"]["run"]["outputs"]["sandbox"]["image"] != image
    finally:
        docker_backend.remove(kept["id"])
        docker_backend.remove_image(snapshot_ref(collection.name, name))
