"""Installing agent CLIs on a real engine, and the runs that must fail
before an agent starts: a missing key, a missing required secret, an install
that cannot succeed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from tests.support.model_script import ANSWER_TEXT
from tests.support.runs import run_folder

from pier.agents import get_agent
from pier.agents.codex import CodexAgent
from pier.agents.install import run_install
from pier.lifecycle.start import RunRequest, Services, run
from pier.runbook import parse
from pier.sandbox.base import LABEL_RUN, Limits, SandboxSpec
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import get_settings
from pier.tasks import task_from_runbook

pytestmark = pytest.mark.integration
PROVIDER_VARS = ("ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "AWS_BEARER_TOKEN_BEDROCK", "OPENAI_API_KEY")


def write_runbook(folder: Path, front: dict, body: str = "Write {{results_dir}}/answer.md.") -> Path:
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    (folder / "RUNBOOK.md").write_text("---\n" + "\n".join(lines) + f"\n---\n# Task\n\n{body}\n")
    return folder


def pier_cli(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    return subprocess.run(
        [sys.executable, "-m", "pier.cli", "run", *args], capture_output=True, text=True, timeout=timeout,
        env={**clean, **env},
    )  # fmt: skip


def flat(text: str) -> str:
    """The CLI's message with rich's line wrapping undone."""
    return " ".join(text.split())


def test_from_a_bare_image_pier_installs_node_and_the_cli_then_the_run_completes(
    docker_backend, base_image, model_server, tmp_path
):
    """pier-base has no Node: claude-code needs Node 22, npm, and its install script
    (run in the sandbox, as no layer exists: the layer a run before built is removed
    first; the run then builds it in the background)."""
    for layer in docker_backend.list_layers():
        if layer.name == "claude-code" and layer.base == base_image:
            docker_backend.remove_layer(layer.image)
    key = f"sk-ant-bare-{uuid.uuid4().hex}"
    folder = write_runbook(tmp_path, {"agent": "claude-code", "model": "claude-sonnet-4-5"})
    env = {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": model_server.url, "PIER_BASE_IMAGE": base_image}
    proc = pier_cli(str(folder), "--snapshot", "", "--image", base_image, "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(proc.stdout)
    assert record["steps"]["run"]["outputs"]["success"] is True
    assert (run_folder(record) / "results" / "answer.md").read_text() == ANSWER_TEXT
    log = "\n".join(e.line for e in Services(get_settings()).store.events(record["trajectory_id"]))
    assert "Node >= 22 with npm is missing" in log and "v22." in log
    assert "agent layer: building in the background; installed in the sandbox in " in log
    assert "claude-code 2.1.332 installed" in log
    assert "claude-code 2.1.332, provider anthropic (pier's model gateway), model claude-sonnet-4-5" in log
    assert {c.credential for c in model_server.model_calls()} == {key}
    assert key not in proc.stdout + proc.stderr + log
    recipe = get_agent("claude-code").layer()
    assert DockerBackend(get_settings()).wait_for_layer_build(base_image, recipe, 900), "the build failed"


@pytest.fixture
def agent_sandbox(docker_backend, agent_image):
    spec = SandboxSpec(image=agent_image, limits=Limits(cpus=2, memory="4G", disk=None),
                       labels={LABEL_RUN: f"install-test-{uuid.uuid4().hex[:8]}"})  # fmt: skip
    sandbox = docker_backend.create(spec)
    yield sandbox
    sandbox.delete()


def test_a_cli_at_the_pinned_version_is_used_as_it_is(agent_sandbox):
    lines: list[str] = []
    run_install(agent_sandbox, CodexAgent.install_spec, lines.append, timeout=600)
    assert lines == ["pier: codex 0.171.0 is in the image; using it"], "nothing was installed"


def test_another_version_is_replaced_by_the_pinned_one(agent_sandbox):
    older = replace(CodexAgent.install_spec, pin=replace(CodexAgent.install_spec.pin, version="0.169.0"))
    lines: list[str] = []
    run_install(agent_sandbox, older, lines.append, timeout=600)
    assert "pier: codex in the image is 'codex-cli 0.171.0'; installing the pinned 0.169.0" in lines
    assert lines[-1] == "pier: codex 0.169.0 installed"
    assert "codex-cli 0.169.0" in agent_sandbox.exec("codex --version 2>/dev/null", workdir="/").output


@pytest.mark.parametrize("network", [True, False])
def test_an_install_that_cannot_succeed_fails_the_run_fast_naming_agent_version_and_output(
    agent_image, model_server, monkeypatch, network
):
    bad = replace(CodexAgent.install_spec.pin, version="0.0.0-pier-missing")
    monkeypatch.setattr(CodexAgent, "install_spec", replace(CodexAgent.install_spec, pin=bad))
    text = (
        f"---\nagent: codex\nmodel: gpt-5.1-codex\nsnapshot: ''\nnetwork_enabled: {str(network).lower()}\n"
        "---\nWrite {{results_dir}}/a.md\n"
    )
    env = {"OPENAI_API_KEY": "sk-install-fail", "OPENAI_BASE_URL": model_server.url + "/v1"}
    request = RunRequest(collection="agents", task_name="bad-install", task=task_from_runbook(parse(text)),
                         run_params={"snapshot": "", "image": agent_image}, env=env)  # fmt: skip
    record = run(Services(get_settings()), request)
    assert record.error is not None
    message = record.error
    what = "installing codex 0.0.0-pier-missing (@openai/codex@0.0.0-pier-missing from npm)"
    if network:  # no layer yet: the sandbox installs (and no layer build follows a failed install)
        assert record.failed_stage == "setup" and f"{what} failed" in message
        log = [e.line for e in Services(get_settings()).store.events(record.trajectory_id)]
        assert not [line for line in log if line.startswith("agent layer: building")], log
    else:  # a sandbox without network cannot install: the run waits for the layer's build
        assert record.failed_stage == "create" and f"{what} into an agent layer" in message
    assert "npm error" in message  # the installer's own last lines
    assert record.stage(record.failed_stage).duration_seconds < 120
    assert record.stage("run_agent").status == "skipped"
    assert not model_server.model_calls()


def test_a_missing_key_fails_before_any_sandbox_naming_the_variable(tmp_path, docker_backend):
    folder = write_runbook(tmp_path, {"agent": "claude-code", "model": "claude-sonnet-4-5"})
    proc = pier_cli(str(folder), "--collection", "nokey", env={}, timeout=120)
    assert proc.returncode == 2
    assert "needs the API key in ANTHROPIC_API_KEY: set ANTHROPIC_API_KEY" in flat(proc.stderr)
    assert not [s for s in docker_backend.list_sandboxes() if s.labels.get("pier.collection") == "nokey"]


def test_the_missing_key_message_for_openrouter_and_for_the_api_path(agent_image):
    text = "---\nagent: codex\nmodel_provider: openrouter\nsnapshot: ''\n---\nWrite {{results_dir}}/a.md\n"
    request = RunRequest(collection="agents", task_name="nokey", task=task_from_runbook(parse(text)),
                         run_params={"snapshot": "", "image": agent_image}, env={"OPENAI_API_KEY": "sk-x"})  # fmt: skip
    record = run(Services(get_settings()), request)
    assert record.error is not None and record.failed_stage == "prepare"
    assert "model_provider openrouter needs the API key in OPENROUTER_API_KEY" in record.error
    assert record.outputs.sandbox.id is None


def test_a_missing_required_secret_fails_early_naming_it(tmp_path):
    front = {
        "agent": "claude-code",
        "secrets": {"REPORT_TOKEN": {"env": "PIER_TEST_REPORT_TOKEN", "required": True}},
    }
    folder = write_runbook(tmp_path, front)
    proc = pier_cli(str(folder), env={"ANTHROPIC_API_KEY": "sk-present"}, timeout=120)
    assert proc.returncode == 2
    assert "secret REPORT_TOKEN is required: set PIER_TEST_REPORT_TOKEN" in flat(proc.stderr)
