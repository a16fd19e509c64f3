"""The default snapshot is what its name says, built from its recipe on the
README's local base (PIER_SNAPSHOT_BASE_IMAGE): a runbook that names no snapshot
gets python3 as the image says it is (3.12 where a source of it answers the
build, else a warning naming the shortfall), the four agent CLIs, Node 22, and a
Playwright whose default launch() finds the browser; a run of an agent CLI on it
installs nothing (seen from the engine: no install exec in its sandbox) and the
CLI is told of the Playwright MCP server; and the sandbox runs under gVisor
(runsc) where the engine has it registered, as the run's log, its record and
the CLI's first line say.

Building the snapshot takes about three to five minutes on two shared cores the
first time; its tag is its recipe's content hash, so the session (and every
later one on the same engine) builds it once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from tests.integration.test_agents import CASES, QUESTION
from tests.support.api_server import runbook
from tests.support.model_script import ANSWER_TEXT
from tests.support.runs import run_folder

from pier.lifecycle.start import Services
from pier.sandbox.snapshots import SnapshotCatalog
from pier.settings import Settings, get_settings

pytestmark = pytest.mark.integration
PROVIDER_VARS = ("ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "AWS_BEARER_TOKEN_BEDROCK", "OPENAI_API_KEY")

SCREENSHOT = """\
from playwright.sync_api import sync_playwright
with sync_playwright() as p:
    browser = p.chromium.launch()
    page = browser.new_page()
    page.set_content("<h1>pier</h1>")
    page.screenshot(path="/app/results/shot.png")
    browser.close()
"""
PROBE = f"""\
python3 -c 'import platform; print(platform.python_version())' > {{{{results_dir}}}}/python3.txt
for cli in claude codex opencode hermes; do command -v "$cli" || echo "missing $cli"; done > {{{{results_dir}}}}/clis.txt
node --version > {{{{results_dir}}}}/node.txt
cat > /tmp/shot.py <<'EOF'
{SCREENSHOT}EOF
python3 /tmp/shot.py"""


@pytest.fixture(scope="session")
def default_snapshot(docker_backend, base_image) -> tuple[str, dict[str, str]]:
    """python312-uv built on base_image (its tag, and the versions read from the
    built image), once per recipe."""
    catalog = SnapshotCatalog(Settings(snapshot_base_image=base_image))
    snapshot = catalog.get("python312-uv")
    assert snapshot is not None
    began = time.monotonic()
    ref = docker_backend.ensure_image(snapshot.source(), lambda line: None, timeout=3600)
    print(f"python312-uv ready in {time.monotonic() - began:.0f} s: {ref}")
    return ref, catalog.facts(docker_backend, ref)


@pytest.fixture
def default_settings(base_image, monkeypatch) -> dict[str, str]:
    """The environment of a `pier run` with pier's defaults: the snapshot base the
    README sets, the runtime left to pier (auto), no provider keys."""
    monkeypatch.setenv("PIER_SNAPSHOT_BASE_IMAGE", base_image)
    monkeypatch.delenv("PIER_SANDBOX_RUNTIME", raising=False)
    get_settings.cache_clear()
    return {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}


def expected_runtime(docker_backend) -> str:
    return "runsc" if "runsc" in docker_backend.facts.runtimes else docker_backend.facts.default_runtime


def pier_run(folder: Path, env: dict[str, str]) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "pier.cli", "run", str(folder), "--json"],
        capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), done.stderr


def test_a_runbook_without_a_snapshot_gets_python_the_clis_node_and_a_browser_that_launches(
    default_snapshot, default_settings, docker_backend, tmp_path
):
    ref, facts = default_snapshot
    (tmp_path / "RUNBOOK.md").write_text(runbook(PROBE))  # no snapshot: the default

    record, stderr = pier_run(tmp_path, default_settings)

    outputs = record["steps"]["run"]["outputs"]
    assert outputs["success"] is True, outputs.get("error")
    assert outputs["sandbox"]["source"] == "snapshot" and outputs["sandbox"]["name"] == "python312-uv"
    assert outputs["sandbox"]["image"] == ref
    results = run_folder(record) / "results"
    python3 = (results / "python3.txt").read_text().strip()
    # python3 is what the image says it is; 3.12 unless no source of it answered
    # the build, and then the run says so (this deployment: no python3.12 in
    # Debian bookworm, and no python-build-standalone mirror set).
    assert python3 == facts["python3"]
    if not python3.startswith("3.12."):
        assert any(
            w.startswith(f"python312-uv promises python3 3.12; the image has {python3}")
            for w in outputs["warnings"]
        )
    clis = (results / "clis.txt").read_text().split()
    assert [Path(c).name for c in clis] == ["claude", "codex", "opencode", "hermes"], clis
    assert (results / "node.txt").read_text().startswith("v22.")
    shot = (results / "shot.png").read_bytes()
    assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 1000

    runtime = expected_runtime(docker_backend)
    assert outputs["sandbox"]["runtime"] == runtime
    log = "\n".join(e.line for e in Services(get_settings()).store.events(record["trajectory_id"]))
    assert f"up (runtime {runtime}, " in log
    assert f"sandboxes run under {runtime} (PIER_SANDBOX_RUNTIME=auto" in " ".join(stderr.split())


def exec_commands(sandbox_id: str, since: int) -> list[str]:
    """What the engine was asked to exec in the sandbox (its exec_create events)."""
    events = subprocess.run(
        ["docker", "events", "--since", str(since), "--until", str(int(time.time()) + 1),
         "--filter", f"container={sandbox_id}", "--filter", "event=exec_create", "--format", "{{json .}}"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return [json.loads(line).get("Action", "") for line in events.stdout.splitlines() if line.strip()]


def test_an_agent_cli_on_the_built_snapshot_installs_nothing_and_is_told_of_the_playwright_mcp_server(
    default_snapshot, default_settings, docker_backend, model_server, tmp_path
):
    case = CASES[0]  # claude-code, Anthropic
    key = f"sk-ant-snapshot-{uuid.uuid4().hex}"
    front = {"agent": case.agent, "model": case.model, "primary_outputs": ["answer.md"]}
    lines = [f"{k}: {json.dumps(v)}" for k, v in front.items()]
    (tmp_path / "RUNBOOK.md").write_text("---\n" + "\n".join(lines) + f"\n---\n# Answer\n\n{QUESTION}\n")
    env = {**default_settings, case.key_env: key, case.base_env: model_server.url + case.base_suffix}
    since = int(time.time()) - 1

    record, _ = pier_run(tmp_path, env)

    outputs = record["steps"]["run"]["outputs"]
    assert outputs["success"] is True, outputs.get("error")
    assert (run_folder(record) / "results" / "answer.md").read_text() == ANSWER_TEXT
    log = "\n".join(e.line for e in Services(get_settings()).store.events(record["trajectory_id"]))
    assert "agent: claude-code 2.1.332 is in the image; nothing to install" in log
    assert "agent layer:" not in log and "pier: installing" not in log
    commands = exec_commands(outputs["sandbox"]["id"], since)
    assert commands, "no exec was seen at all: the events filter is wrong"
    installs = [c for c in commands if "at_pin" in c or "npm install" in c]
    assert installs == [], installs
    # The CLI started the snapshot's Playwright MCP server: its tools went to the model.
    assert any("mcp__playwright__browser_navigate" in json.dumps(c.body) for c in model_server.model_calls())
    took = {s["name"]: s["duration_seconds"] for s in outputs["stages"] if s["name"] in ("create", "setup")}
    print(f"on the built snapshot: create {took['create']:.1f} s, set-up {took['setup']:.1f} s")
