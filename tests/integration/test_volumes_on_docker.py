"""A collection's named volumes (a runbook's `volumes:`), on a real Docker
engine with the script agent: what run 1 writes, run 2 of the collection sees
and another collection's run with the same volume name does not; a read-only
volume refuses the agent's write; `pier volume list|rm` and the API's routes
see only the collection's own (docs/sessions.md#volumes)."""

from __future__ import annotations

import json
import uuid

import pytest
import yaml
from tests.integration.test_lifecycle import on_image
from tests.support.runs import run_folder
from typer.testing import CliRunner

from pier.cli import app
from pier.lifecycle.start import RunRequest, Services, run
from pier.lifecycle.volumes import engine_name, list_volumes
from pier.runbook import parse
from pier.sandbox.base import LABEL_VOLUME, LABEL_VOLUME_COLLECTION
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration

PREFIX = "keep2-vol-"  # every collection (and so every volume) these tests make


def runbook(script: str, volumes: dict) -> str:
    front = {"agent": "script", "snapshot": "", "volumes": volumes}
    return f"---\n{yaml.safe_dump(front)}---\n# t\n\n```bash\n{script}\n```\n"


def go(script: str, collection: str, volumes: dict, image: str):
    task = task_from_runbook(parse(runbook(script, volumes)))
    request = RunRequest(collection=collection, task_name="t", task=task, run_params=on_image(image))
    return run(Services(get_settings()), request)


@pytest.fixture
def collections(docker_backend):
    """Two fresh collections; their volumes removed after the test."""
    made = [f"{PREFIX}{uuid.uuid4().hex[:10]}" for _ in range(2)]
    yield made
    for collection in made:
        for volume in list_volumes(docker_backend, collection):
            docker_backend.remove_volume(volume.engine_name)


CACHE = {"cache": {"path": "/root/.cache/pier-test"}}
WRITE = "echo from-run-1 > /root/.cache/pier-test/seen.txt\necho ok > {{results_dir}}/ok.txt"
READ = "cat /root/.cache/pier-test/seen.txt > {{results_dir}}/seen.txt 2>&1 || echo none > {{results_dir}}/seen.txt"


def test_a_volume_is_seen_by_the_collections_next_run_and_not_by_another_collections(
    base_image, docker_backend, collections
):
    mine, theirs = collections
    first = go(WRITE, mine, CACHE, base_image)
    assert first.success, first.error
    second = go(READ, mine, CACHE, base_image)
    assert second.success, second.error
    assert (run_folder(second) / "results" / "seen.txt").read_text() == "from-run-1\n"
    other = go(READ, theirs, CACHE, base_image)
    assert other.success, other.error
    assert (run_folder(other) / "results" / "seen.txt").read_text() == "none\n", (
        "another collection's run saw this collection's volume"
    )
    volumes = {v.labels[LABEL_VOLUME_COLLECTION]: v for v in docker_backend.list_volumes({LABEL_VOLUME: "cache"})
               if v.labels.get(LABEL_VOLUME_COLLECTION) in collections}  # fmt: skip
    assert set(volumes) == {mine, theirs}
    assert (
        volumes[mine].name
        == engine_name(mine, "cache")
        != volumes[theirs].name
        == engine_name(theirs, "cache")
    )
    assert not any(s.labels.get("pier.run") in (first.trajectory_id, second.trajectory_id)
                   for s in docker_backend.list_sandboxes()), "the sandboxes were deleted, the volume stays"  # fmt: skip

    runner = CliRunner()
    listed = runner.invoke(app, ["volume", "list", "--collection", mine, "--json"])
    assert listed.exit_code == 0, listed.output
    assert [v["name"] for v in json.loads(listed.output)["volumes"]] == ["cache"]
    gone = runner.invoke(app, ["volume", "rm", "nope", "--collection", mine])
    assert gone.exit_code == 1 and "no volume 'nope'" in gone.output
    bad = runner.invoke(app, ["volume", "rm", "../x", "--collection", mine])
    assert bad.exit_code == 2 and "not allowed" in bad.output
    removed = runner.invoke(app, ["volume", "rm", "cache", "--collection", mine])
    assert removed.exit_code == 0, removed.output
    assert list_volumes(docker_backend, mine) == []
    assert [v.name for v in list_volumes(docker_backend, theirs)] == ["cache"], (
        "rm reached another collection"
    )
    third = go(READ, mine, CACHE, base_image)
    assert (run_folder(third) / "results" / "seen.txt").read_text() == "none\n", "rm left the data"


SEED = {"datasets": {"path": "/seed"}}
DATASETS = {"datasets": {"path": "/data", "read_only": True}}
PLANT = "echo rows > /seed/table.csv && echo ok > {{results_dir}}/ok.txt"
TRY_WRITE = """cat /data/table.csv > {{results_dir}}/read.txt
if echo more >> /data/table.csv 2> {{results_dir}}/error.txt; then echo wrote; else echo refused; fi > {{results_dir}}/write.txt
touch /data/new 2>> {{results_dir}}/error.txt || true"""


def test_a_read_only_volume_is_read_only_to_the_agent(base_image, docker_backend, collections):
    collection = collections[0]
    seeded = go(PLANT, collection, SEED, base_image)
    assert seeded.success, seeded.error
    tried = go(TRY_WRITE, collection, DATASETS, base_image)
    assert tried.success, tried.error
    assert [(v.name, v.path, v.read_only) for v in tried.outputs.sandbox.volumes] == [
        ("datasets", "/data", True)
    ], "the run's record does not name the volume it mounted (the run page shows it)"
    results = run_folder(tried) / "results"
    assert (results / "read.txt").read_text() == "rows\n"
    assert (results / "write.txt").read_text() == "refused\n", "the agent wrote into a read-only volume"
    assert "Read-only file system" in (results / "error.txt").read_text()
    check = go(
        "cat /seed/table.csv > {{results_dir}}/after.txt; [ -e /seed/new ] && echo present > {{results_dir}}/new.txt"
        " || echo absent > {{results_dir}}/new.txt",
        collection, SEED, base_image,
    )  # fmt: skip
    assert (run_folder(check) / "results" / "after.txt").read_text() == "rows\n", (
        "the refused append changed it"
    )
    assert (run_folder(check) / "results" / "new.txt").read_text() == "absent\n", "a file was made in it"


def test_the_api_lists_and_removes_only_the_collections_volumes(
    base_image, docker_backend, collections, tmp_path
):
    from tests.support.api_server import ADMIN_TOKEN, Server

    mine, theirs = collections
    assert go(WRITE, mine, CACHE, base_image).success
    (tmp_path / "serve").mkdir()
    server = Server(home=tmp_path / "serve", db_url=f"sqlite:///{tmp_path / 'serve.db'}", settings={})
    server.start(port=21531)
    try:
        with server.client(ADMIN_TOKEN) as admin:
            tokens = {}
            for name in collections:
                made = admin.post("/api/v1/collections", json={"name": name})
                assert made.status_code == 201, made.text
                tokens[name] = made.json()["token"]
        with server.client(tokens[theirs]) as stranger:
            assert stranger.get(f"/api/v1/volume/{theirs}").json()["volumes"] == []
            assert stranger.delete(f"/api/v1/volume/{theirs}/cache").status_code == 404
            assert stranger.get(f"/api/v1/volume/{mine}").status_code in (401, 403)
            assert stranger.delete(f"/api/v1/volume/{mine}/cache").status_code in (401, 403)
        with server.client(tokens[mine]) as owner:
            listed = owner.get(f"/api/v1/volume/{mine}")
            assert listed.status_code == 200, listed.text
            assert [(v["name"], v["engine_name"]) for v in listed.json()["volumes"]] == [
                ("cache", engine_name(mine, "cache"))
            ]
            assert owner.delete(f"/api/v1/volume/{mine}/..").status_code in (404, 422)
            removed = owner.delete(f"/api/v1/volume/{mine}/cache")
            assert removed.status_code == 200, removed.text
            assert owner.get(f"/api/v1/volume/{mine}").json()["volumes"] == []
    finally:
        server.stop()
