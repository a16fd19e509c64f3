"""The platform's own TypeScript client, @jetty/sdk (pinned in tests/sdk),
against a real `pier serve` on SQLite and on PostgreSQL: every public
JettyClient method, and gradeWithJetty, answers what dist/types.d.ts declares.
The Node script (tests/sdk/client_suite.mjs) does the driving; this test starts
the server, hands it a collection, and reports each method's result."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.api_server import ADMIN_TOKEN, STORAGES, Server, make_collection, storage_settings
from tests.support.sdk import SUITE, node

pytestmark = pytest.mark.integration

# The 33 public methods of JettyClient 0.4.0: the suite must drive every one.
CLIENT_METHODS = 33
SUITE_TIMEOUT_SEC = 900
README = Path(__file__).resolve().parents[3] / "docs" / "api.md"  # where the SDK snippet lives


@pytest.fixture(scope="module")
def sdk_server(new_db, tmp_path_factory, docker_backend, base_image) -> Iterator[Server]:
    srv = Server(
        home=tmp_path_factory.mktemp("pier-sdk"),
        db_url=new_db(),
        settings={
            "PIER_MAX_CONCURRENT_RUNS": "2",
            "PIER_TRIAL_KEYS": json.dumps({"PIER_TRIAL_PROBE": "trial-secret"}),
            "PIER_TRIAL_RUNS": "3",
        },
    ).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module", params=STORAGES)
def sdk_storage_server(request, sdk_server, new_db, tmp_path_factory) -> Iterator[Server]:
    """sdk_server (outputs in a local folder), then one that keeps them in S3 and
    answers file downloads with a redirect to a presigned URL, which the SDK's
    downloadFile follows."""
    if request.param == "local":
        yield sdk_server
        return
    settings = {**storage_settings(request.param), "PIER_STORAGE_PRESIGN_SEC": "300"}
    srv = Server(home=tmp_path_factory.mktemp("pier-sdk-s3"), db_url=new_db(), settings=settings).start()
    yield srv
    srv.stop()


def test_every_client_method_works_against_pier_serve(sdk_server: Server, base_image: str) -> None:
    binary = node()
    collection = make_collection(sdk_server, base_image, prefix="sdk")
    config = {
        "url": sdk_server.url,
        "admin_token": ADMIN_TOKEN,
        "collection": collection.name,
        "token": collection.token,
        "image": base_image,
    }
    done = subprocess.run(
        [binary, str(SUITE)],
        env={"PATH": "/usr/bin:/bin", "PIER_SDK_CONFIG": json.dumps(config),
             "HOME": str(sdk_server.home)},
        capture_output=True, text=True, timeout=SUITE_TIMEOUT_SEC, cwd=SUITE.parent,
    )  # fmt: skip
    assert done.stdout.strip(), f"the suite printed nothing:\n{done.stderr[-3000:]}\n{sdk_server.log_tail()}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    failed = [f"{r['method']}: {r['detail']}" for r in report["results"] if not r["ok"]]
    print("\n".join(f"{r['method']}: {'ok' if r['ok'] else 'FAILED'}" for r in report["results"]))
    assert not failed, "\n".join(failed) + f"\n--- server log ---\n{sdk_server.log_tail()}"
    assert report["missing"] == [], f"JettyClient methods no block drives: {report['missing']}"
    assert len(report["public"]) == CLIENT_METHODS, f"the pinned client's methods changed: {report['public']}"
    assert done.returncode == 0, done.stderr[-3000:]


def test_trial_keys_never_fill_a_key_a_sandbox_would_see(sdk_server: Server, base_image: str) -> None:
    """The platform's trial flow, as pier keeps it: a trial key reaches only pier's
    model gateway, so a runbook that would hold it in its sandbox (a secret of the
    key's variable, run by the script agent) is refused naming the variable, with
    or without the trial activated, and spends no trial run."""
    collection = make_collection(sdk_server, base_image, prefix="trial")
    script = "echo ${#PIER_TRIAL_PROBE} > {{results_dir}}/len.txt"
    collection.put_task("needs-key", script, secrets={"PIER_TRIAL_PROBE": {"required": True}})
    c = collection.client()
    url = f"/api/v1/run/{collection.name}/needs-key"
    refused = c.post(url, json={})
    assert refused.status_code == 422 and "PIER_TRIAL_PROBE" in refused.json()["detail"]
    asked = c.post(url, json={"use_trial_keys": True})
    assert asked.status_code == 422, asked.text
    assert "PIER_TRIAL_PROBE" in asked.json()["detail"] and "trial key" in asked.json()["detail"]
    status = c.post(f"/api/v1/trial/{collection.name}/activate").json()
    assert status["active"] is True and status["runs_used"] == 0, status
    automatic = c.post(url, json={})
    assert automatic.status_code == 422 and "PIER_TRIAL_PROBE" in automatic.json()["detail"], automatic.text
    assert c.get(f"/api/v1/trial/{collection.name}").json()["runs_used"] == 0, (
        "a refused run spent a trial run"
    )


def _readme_snippet() -> str:
    text = README.read_text()
    section = text.split("## Using the platform's SDK", 1)[1].split("\n## ", 1)[0]
    return section.split("```js\n", 1)[1].split("```", 1)[0]


def test_the_readme_snippet_runs(sdk_storage_server: Server, base_image: str) -> None:
    """Runs, lists, labels and downloadFile, with outputs in a local folder and in S3."""
    sdk_server = sdk_storage_server
    binary = node()
    collection = make_collection(sdk_server, base_image, prefix="readme")
    collection.put_task("hello", "echo 'hello {{name}}' > {{results_dir}}/hello.md")
    script = SUITE.parent / f"readme-{collection.name}.mjs"  # beside node_modules, so the import resolves
    script.write_text(_readme_snippet())
    try:
        done = subprocess.run(
            [binary, str(script)],
            env={"PATH": "/usr/bin:/bin", "PIER_URL": sdk_server.url, "PIER_TOKEN": collection.token,
                 "PIER_COLLECTION": collection.name, "HOME": str(sdk_server.home)},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        script.unlink()
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("completed true prepare:completed")
    assert lines[1] == "hello.md hello sdk"
    assert lines[3].startswith("1 run(s); stats:")
    with collection.client() as c:
        listed = c.get(f"/api/v1/db/trajectories/{collection.name}/hello", params={"label": "reviewed=yes"})
        key = listed.json()["trajectories"][0]["steps"]["run"]["outputs"]["files"][0]
        served = c.get(f"/api/v1/file/{key}")
    assert listed.json()["total"] == 1
    if "PIER_STORAGE_PRESIGN_SEC" in sdk_server.settings:  # what downloadFile followed
        assert served.status_code == 307 and "X-Amz-Signature" in served.headers["location"], served.text
    else:
        assert served.status_code == 200 and served.text == "hello sdk\n"
