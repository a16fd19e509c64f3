"""The calls the platform's skills repository's shell helper makes (bash
functions around curl and jq, pointed at a server by JETTY_API_URL with
JETTY_API_TOKEN as the bearer token), made here the same way against a real
`pier serve`: each test writes a bash script of those calls, in the helper's
shapes (`curl -sf ... | jq <its filter>`), and runs it with bash. Every call
must exit 0 (curl -sf fails on an HTTP error, jq on a shape its filter cannot
read) and every filter must print the lines expected of pier's answer.

The helper's own code is not in this repository: these are the calls it makes,
written for this test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.support.api_server import Collection, runbook
from tests.support.services import require_service

pytestmark = pytest.mark.integration

# What every script starts with: stop at the first call that fails, and say which.
PRELUDE = """\
set -euo pipefail
trap 'echo "call failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
AUTH="Authorization: Bearer $JETTY_API_TOKEN"
"""
SCRIPT = """echo "hello {{who}}" > {{results_dir}}/hello.txt
if ls /app/assets/* >/dev/null 2>&1; then cat /app/assets/* > {{results_dir}}/seen.txt; fi"""


@pytest.fixture(autouse=True)
def tools() -> None:
    missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
    if missing:
        require_service(" and ".join(missing), "apt-get install curl jq (.ci/run installs them)")


def bash(collection: Collection, tmp_path: Path, body: str, **env: str) -> dict[str, str]:
    """Run PRELUDE + body with bash in tmp_path, JETTY_API_URL and
    JETTY_API_TOKEN set to the collection's server and token; the script writes
    each call's filtered answer to out/<name>. Returns {name: text}."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    script = tmp_path / "calls.sh"
    script.write_text(PRELUDE + body)
    done = subprocess.run(
        ["bash", str(script)],
        cwd=tmp_path,
        env={**os.environ, "JETTY_API_URL": collection.server.url, "JETTY_API_TOKEN": collection.token,
             "C": collection.name, "OUT": str(out), **env},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"stderr:\n{done.stderr}\nstdout:\n{done.stdout}"
    return {path.name: path.read_text() for path in out.iterdir()}


def lines(text: str) -> list[str]:
    return text.splitlines()


def workflow(collection: Collection, script: str) -> str:
    """A runbook task's workflow JSON, as the helper's create and update send it."""
    instruction = runbook(script, image=collection.image, snapshot="", vars={"who": "nobody"})
    task = {"init_params": {"instruction": instruction}, "steps": ["run"],
            "step_configs": {"run": {"activity": "runbook"}}}  # fmt: skip
    return json.dumps(task)


TASK_CALLS = r"""
curl -sf "$JETTY_API_URL/api/v1/health" > "$OUT/health"
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/collections/" \
  | jq -r '.[] | "\(.name)\t\(.description // "No description")"' > "$OUT/collections"
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/collections/$C" | jq > "$OUT/collection"

body=$(jq -n --arg name greet --arg desc "Says hello" --argjson workflow "$(cat workflow.json)" \
  '{name: $name, description: $desc, workflow: $workflow}')
curl -sf -X POST -H "$AUTH" -H "Content-Type: application/json" -d "$body" \
  "$JETTY_API_URL/api/v1/tasks/$C" | jq > "$OUT/created"
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/tasks/$C/" \
  | jq -r '.[] | "\(.name)\t\(.description // "No description")"' > "$OUT/tasks"
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/tasks/$C/greet" | jq > "$OUT/task"
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/tasks/$C/greet" | jq '.workflow' > "$OUT/workflow"

body=$(jq -n --argjson workflow "$(cat workflow2.json)" '{workflow: $workflow}')
curl -sf -X PUT -H "$AUTH" -H "Content-Type: application/json" -d "$body" \
  "$JETTY_API_URL/api/v1/tasks/$C/greet" | jq > "$OUT/updated"
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/tasks/$C/greet" | jq '.workflow' > "$OUT/workflow2"
"""


def test_health_collections_and_task_create_update(collection: Collection, tmp_path: Path):
    (tmp_path / "workflow.json").write_text(workflow(collection, SCRIPT))
    (tmp_path / "workflow2.json").write_text(workflow(collection, SCRIPT.replace("hello", "hi")))
    out = bash(collection, tmp_path, TASK_CALLS)
    assert json.loads(out["health"])["status"] in ("ok", "degraded")
    assert lines(out["collections"]) == [f"{collection.name}\tNo description"]
    assert json.loads(out["collection"])["name"] == collection.name
    assert json.loads(out["created"])["name"] == "greet"
    assert lines(out["tasks"]) == ["greet\tSays hello"]
    task = json.loads(out["task"])
    assert task["name"] == "greet" and task["description"] == "Says hello"
    stored = json.loads(out["workflow"])
    assert stored["steps"] == ["run"] and "hello {{who}}" in stored["init_params"]["instruction"]
    updated = json.loads(out["updated"])
    assert updated["description"] == "Says hello", "an update of the workflow keeps the description"
    again = json.loads(out["workflow2"])["init_params"]["instruction"]
    assert "hi {{who}}" in again and "hello" not in again


RUN_CALLS = r"""
params='{"vars": {"who": "async"}}'
curl -sf -X POST -H "$AUTH" -F "init_params=$params" "$JETTY_API_URL/api/v1/run/$C/greet" | jq > "$OUT/run"
workflow_id=$(jq -r '.workflow_id' "$OUT/run")
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/workflows-logs/$workflow_id" | jq > "$OUT/logs"

params='{"vars": {"who": "sync"}}'
curl -sf -X POST -H "$AUTH" -F "init_params=$params" -F "files=@input.txt" \
  "$JETTY_API_URL/api/v1/run-sync/$C/greet" | jq > "$OUT/run-sync"
"""


READ_CALLS = r"""
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/db/trajectories/$C/greet?limit=10" \
  | jq -r '.trajectories[] | "\(.trajectory_id)\t\(.status)\t\(.created // "N/A")"' > "$OUT/trajectories"
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/db/trajectory/$C/greet/$SYNCED" \
  | jq '.steps | to_entries | last | .value.outputs' > "$OUT/outputs"
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/db/stats/$C/greet" | jq > "$OUT/stats"
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/workflows-logs/$FIRST" | jq > "$OUT/logs"
"""


def test_run_run_sync_with_a_file_logs_trajectories_and_stats(collection: Collection, tmp_path: Path):
    collection.put_task("greet", SCRIPT, vars={"who": "nobody"})
    (tmp_path / "input.txt").write_text("from the helper\n")
    out = bash(collection, tmp_path, RUN_CALLS)
    started = json.loads(out["run"])
    assert started["trajectory_id"] and started["workflow_id"].endswith(started["trajectory_id"])
    logs = json.loads(out["logs"])
    assert logs["workflow_id"] == started["workflow_id"] and isinstance(logs["logs"], list)
    synced = json.loads(out["run-sync"])
    assert synced["status"] == "completed", synced["trajectory"].get("error")
    first = collection.wait("greet", started["trajectory_id"])
    assert first["status"] == "completed", first.get("error")

    out = bash(collection, tmp_path, READ_CALLS, SYNCED=synced["trajectory_id"], FIRST=started["workflow_id"])
    listed = [line.split("\t") for line in lines(out["trajectories"])]
    assert [(tid, status) for tid, status, _ in listed] == [
        (synced["trajectory_id"], "completed"),
        (started["trajectory_id"], "completed"),
    ], "newest first"
    assert all(created != "N/A" and created[:4].isdigit() for _, _, created in listed)
    outputs = json.loads(out["outputs"])
    assert {"hello.txt", "seen.txt"} <= {f["path"] for f in outputs["results_files"]}, outputs
    stats = json.loads(out["stats"])
    assert stats["total"] == 2 and stats["by_status"]["completed"] == 2
    assert json.loads(out["logs"])["logs"], "the ended run's log has lines"
    with collection.client() as c:
        seen = c.get(f"/api/v1/file/{collection.name}/greet/{synced['trajectory_id']}/results/seen.txt")
        said = c.get(f"/api/v1/file/{collection.name}/greet/{started['trajectory_id']}/results/hello.txt")
    assert seen.text == "from the helper\n", "the -F files= upload reached /app/assets"
    assert said.text == "hello async\n", "the -F init_params= field's vars reached the runbook"


TEMPLATE_CALLS = r"""
curl -sf "$JETTY_API_URL/api/v1/step-templates" | jq -c '[.templates[] | .activity_name]' > "$OUT/names"
curl -sf "$JETTY_API_URL/api/v1/step-templates" \
  | jq '.templates[] | select(.activity_name == "litellm_chat")' > "$OUT/chat"
curl -sf "$JETTY_API_URL/api/v1/step-templates/runbook" | jq > "$OUT/runbook"
"""


def test_step_templates_without_a_token(collection: Collection, tmp_path: Path):
    """The skills' references list templates with a bare curl (no token) and read
    `{templates, categories, total_count}` (their words: "The step templates API
    response is {templates: [...], categories: [...], total_count: N}"). The shell
    helper's older `jq '.[] | .name'` reads an array the platform no longer answers."""
    out = bash(collection, tmp_path, TEMPLATE_CALLS)
    with collection.server.client(token=None) as c:
        listed = c.get("/api/v1/step-templates").json()
    names = json.loads(out["names"])
    assert names == [t["activity_name"] for t in listed["templates"]] and len(names) == listed["total_count"]
    assert {"runbook", "litellm_chat", "simple_judge", "text_split"} <= set(names)
    chat = json.loads(out["chat"])
    assert chat["activity_name"] == "litellm_chat" and chat["description"] and chat["parameters"]
    runbook_template = json.loads(out["runbook"])
    assert (
        runbook_template["name"] == "runbook"
        and "timeout_sec" in runbook_template["config_schema"]["properties"]
    )


CATALOGUE_CALLS = r"""
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/datasets/$C" \
  | jq -r '.[] | "\(.name)\t\(.description // "No description")"' > "$OUT/datasets"
curl -sf -H "$AUTH" "$JETTY_API_URL/api/v1/models/$C/" \
  | jq -r '.[] | "\(.name)\t\(.description // "No description")"' > "$OUT/models"
"""


def test_datasets_and_models(collection: Collection, tmp_path: Path):
    body = {"name": "cities",
            "runbook": runbook("echo {{city}} > {{results_dir}}/c.txt", image=collection.image, snapshot="",
                               vars={"city": "x"}),
            "attempts": 1, "matrix": {"vars": [{"city": "Paris"}, {"city": "Lima"}]}}  # fmt: skip
    with collection.client() as c:
        created = c.post(f"/api/v1/experiments/{collection.name}", json=body)
        assert created.status_code == 201, created.text
        c.patch(f"/api/v1/collections/{collection.name}/environment",
                json={"environment_variables": {"ANTHROPIC_API_KEY": "k"}})  # fmt: skip
    try:
        out = bash(collection, tmp_path, CATALOGUE_CALLS)
    finally:
        with collection.client() as c:
            c.post(f"/api/v1/experiments/{collection.name}/{created.json()['id']}/cancel")
    with collection.client() as c:
        (dataset,) = c.get(f"/api/v1/datasets/{collection.name}").json()
        ids = [m["id"] for m in c.get(f"/api/v1/models/{collection.name}").json()]
    assert dataset["name"] == "cities" and lines(out["datasets"]) == [f"cities\t{dataset['description']}"]
    assert ids and lines(out["models"]) == [f"{model_id}\tNo description" for model_id in ids]
