"""The platform's OpenAI-style Files API (POST /api/v1/files and the ids a run
names in init_params.files), its dataset and model listings, against a real
`pier serve`: a file uploaded by id reaches /app/assets, an id in file_paths is
refused naming the field that takes it, and another collection sees none of it."""

from __future__ import annotations

import json

import pytest
from tests.support.api_server import Collection, make_collection, runbook

pytestmark = pytest.mark.integration

SCRIPT = "cat /app/assets/* > {{results_dir}}/seen.txt"


def upload(collection: Collection, content: bytes, name: str = "input.csv", token: str | None = None):
    with collection.client(token) as c:
        return c.post("/api/v1/files", files={"file": (name, content)}, data={"purpose": "assistants"})


def test_a_file_uploaded_by_id_reaches_the_sandbox(collection: Collection):
    r = upload(collection, b"a,b\n1,2\n")
    assert r.status_code == 200, r.text
    made = r.json()
    assert made["id"].startswith("file-") and made["object"] == "file"
    assert made["filename"] == "input.csv" and made["bytes"] == 8 and made["purpose"] == "assistants"
    with collection.client() as c:
        assert c.get(f"/api/v1/files/{made['id']}").json()["id"] == made["id"]
        assert made["id"] in [f["id"] for f in c.get("/api/v1/files").json()["data"]]
    collection.put_task("reads", SCRIPT)
    with collection.client() as c:
        started = c.post(
            f"/api/v1/run/{collection.name}/reads", json={"init_params": {"files": [made["id"]]}}
        )
        assert started.status_code == 200, started.text
        tid = started.json()["trajectory_id"]
    record = collection.wait("reads", tid)
    assert record["status"] == "completed", record.get("error")
    with collection.client() as c:
        seen = c.get(f"/api/v1/file/{collection.name}/reads/{tid}/results/seen.txt")
    assert seen.text == "a,b\n1,2\n"


def test_a_file_id_in_file_paths_is_refused_naming_the_field(collection: Collection):
    made = upload(collection, b"x").json()
    collection.put_task("reads", SCRIPT)
    with collection.client() as c:
        r = c.post(f"/api/v1/run/{collection.name}/reads", json={"init_params": {"file_paths": [made["id"]]}})
        assert r.status_code == 422, r.text
        assert "init_params.files" in r.text and "file_paths" in r.text
        assert (
            c.get(f"/api/v1/db/trajectories/{collection.name}/reads").json()["total"] == 0
        )  # nothing started


def test_another_collections_file_id_is_not_found(server, base_image, collection: Collection):
    theirs = make_collection(server, base_image, prefix="other")
    made = upload(theirs, b"theirs").json()
    collection.put_task("reads", SCRIPT)
    with collection.client() as c:
        assert c.get(f"/api/v1/files/{made['id']}").status_code == 404
        assert made["id"] not in [f["id"] for f in c.get("/api/v1/files").json()["data"]]
        assert c.delete(f"/api/v1/files/{made['id']}").status_code == 404
        r = c.post(f"/api/v1/run/{collection.name}/reads", json={"init_params": {"files": [made["id"]]}})
        assert r.status_code == 422 and "not found" in r.text, r.text
    with theirs.client() as c:
        assert c.get(f"/api/v1/files/{made['id']}").status_code == 200  # still theirs, untouched
        assert c.delete(f"/api/v1/files/{made['id']}").json()["deleted"] is True
        assert c.get(f"/api/v1/files/{made['id']}").status_code == 404


def test_one_file_part_exactly(collection: Collection):
    with collection.client() as c:
        none = c.post("/api/v1/files", files={"other": ("a.txt", b"a")})
        assert none.status_code == 422 and "`file` part" in none.text


def test_datasets_are_the_experiments_input_rows(collection: Collection):
    body = {"name": "cities", "runbook": runbook("echo {{city}} > {{results_dir}}/c.txt", image=collection.image,
                                                 snapshot="", vars={"city": "x"}),
            "attempts": 1, "matrix": {"vars": [{"city": "Paris"}, {"city": "Lima"}]}}  # fmt: skip
    with collection.client() as c:
        created = c.post(f"/api/v1/experiments/{collection.name}", json=body)
        assert created.status_code == 201, created.text
        listed = c.get(f"/api/v1/datasets/{collection.name}").json()
        assert [(d["name"], d["row_count"], d["columns"]) for d in listed] == [("cities", 2, ["city"])]
        one = c.get(f"/api/v1/datasets/{collection.name}/cities").json()
        assert one["rows"] == [{"city": "Paris"}, {"city": "Lima"}]
        assert c.get(f"/api/v1/datasets/{collection.name}/nope").status_code == 404
        c.post(f"/api/v1/experiments/{collection.name}/{created.json()['id']}/cancel")


def test_models_are_those_the_collections_keys_reach(collection: Collection):
    with collection.client() as c:
        assert c.get(f"/api/v1/models/{collection.name}/").json() == []  # no key: nothing reachable
        c.patch(f"/api/v1/collections/{collection.name}/environment",
                json={"environment_variables": {"ANTHROPIC_API_KEY": "k"}})  # fmt: skip
        models = c.get(f"/api/v1/models/{collection.name}/").json()
        assert models and {m["provider"] for m in models} == {"anthropic"}
        assert all(m["via"] == "collection" and m["key_env"] == "ANTHROPIC_API_KEY" for m in models)
        first = models[0]["id"]
        assert c.get(f"/api/v1/models/{collection.name}/{first}").json()["id"] == first
        assert c.get(f"/api/v1/models/{collection.name}/gpt-5").status_code == 404
        assert '"k"' not in json.dumps(models)  # the key itself is never shown
