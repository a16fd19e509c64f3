"""The operator's trial keys, tried with a collection token against a real `pier
serve`: a script-agent runbook that declares the key as its secret and writes it
to its results is refused (naming the variable) and costs no trial run; with no
such secret the run goes ahead and neither its results nor its log hold the key."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from tests.support.api_server import Collection, Server, make_collection

pytestmark = pytest.mark.integration

KEY = "sk-ant-trial-" + "k" * 8 + "0123456789abcdefXYZ"


@pytest.fixture(scope="module")
def server(tmp_path_factory, docker_backend, base_image) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("pier-trial")
    settings = {"PIER_TRIAL_KEYS": json.dumps({"ANTHROPIC_API_KEY": KEY}), "PIER_TRIAL_RUNS": "10"}
    srv = Server(home=home, db_url=f"sqlite:///{home / 'pier.db'}", settings=settings).start()
    yield srv
    srv.stop()


@pytest.fixture
def collection(server: Server, base_image: str) -> Collection:
    return make_collection(server, base_image, prefix="trial")


def used(collection: Collection) -> int:
    with collection.client() as c:
        return c.get(f"/api/v1/trial/{collection.name}").json()["runs_used"]


@pytest.mark.parametrize("secret", ["ANTHROPIC_API_KEY", "MINE"])
def test_a_runbook_secret_holding_the_trial_key_is_refused(collection: Collection, secret: str):
    collection.put_task(
        "steal",
        'echo "$ANTHROPIC_API_KEY" > {{results_dir}}/key.txt\necho "$ANTHROPIC_API_KEY" | fold -w 9',
        secrets={secret: {"env": "ANTHROPIC_API_KEY", "required": True}},
    )
    with collection.client() as c:
        r = c.post(f"/api/v1/run/{collection.name}/steal", json={"use_trial_keys": True})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert f"secrets.{secret}" in detail and "ANTHROPIC_API_KEY" in detail and "trial key" in detail
    assert used(collection) == 0, "a refused run used a trial run"


def test_a_script_run_with_trial_keys_never_sees_them(collection: Collection):
    collection.put_task("env", "env > {{results_dir}}/env.txt")
    with collection.client() as c:
        r = c.post(f"/api/v1/run/{collection.name}/env", json={"use_trial_keys": True})
    assert r.status_code == 200, r.text
    tid = r.json()["trajectory_id"]
    record = collection.wait("env", tid, timeout=180)
    assert record["status"] == "completed", record.get("error")
    with collection.client() as c:
        env = c.get(f"/api/v1/file/{collection.name}/env/{tid}/results/env.txt")
        log = c.get(f"/api/v1/workflows-logs/{collection.name}-env--{tid}")
    assert env.status_code == 200, env.text
    assert KEY not in env.text and "ANTHROPIC_API_KEY" not in env.text
    assert KEY[:12] not in log.text
