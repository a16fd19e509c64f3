"""The agent installers on the stock bases a user brings (issue: an installer
brings what it needs): Debian bookworm minimal with python3, curl and git but no
python3-venv (so no ensurepip) and no Node, and the same without python3. Each
agent installs there in the run's sandbox (agent layers off, so every run
installs) and answers the scripted model. Ubuntu 24.04 is not in the matrix:
its image needs an Ubuntu mirror for debootstrap, which this deployment does not
reach (only Debian's, PyPI and npm)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from tests.integration.test_agents import CASES, runbook_text, start
from tests.support.model_script import ANSWER_TEXT
from tests.support.runs import run_folder
from tests.support.services import require_service

from pier.lifecycle.start import Services
from pier.settings import get_settings

pytestmark = pytest.mark.integration
BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build-test-image.sh"
# name -> (tag, debootstrap packages): what each stock base has.
BASES = {
    "bookworm-minimal": ("pier-minimal:bookworm", "python3,curl,git,ca-certificates"),
    "bookworm-no-python": ("pier-nopython:bookworm", "curl,git,ca-certificates"),
}
FIRST_CASE = {case.agent: case for case in reversed(CASES)}  # each agent's first (default-provider) case
# The minimal base (no Node, no venv) for every agent; the base without python3
# for the CLI that needs it (the npm CLIs' path there is the minimal base's).
MATRIX = [
    ("bookworm-minimal", agent) for agent in ("hermes", "claude-code", "codex", "opencode", "gemini-cli")
]
MATRIX.append(("bookworm-no-python", "hermes"))


@pytest.fixture(scope="session")
def stock_bases(docker_backend) -> dict[str, str]:
    """Each stock base, built once from Debian by scripts/build-test-image.sh
    (about a minute each) and reused by tag after."""
    built = {}
    for name, (tag, packages) in BASES.items():
        if not docker_backend.image_exists(tag) and shutil.which("debootstrap") and os.geteuid() == 0:
            env = {**os.environ, "PIER_TEST_IMAGE": tag, "PIER_TEST_PACKAGES": packages}
            subprocess.run(["bash", str(BUILD_SCRIPT)], env=env, check=False, timeout=900)
        if not docker_backend.image_exists(tag):
            require_service(
                f"the stock base {tag}", "run scripts/build-test-image.sh as root (needs debootstrap)"
            )
        built[name] = tag
    return built


def test_the_minimal_base_is_what_a_user_would_bring(docker_backend, stock_bases):
    """The bases lack what the installers must bring: no ensurepip, no Node, no uv
    (and the second no python3 at all)."""
    probe = "python3 -c 'import ensurepip' 2>/dev/null && echo ensurepip; command -v node npm uv pip3 python3 || true"
    seen = {
        name: subprocess.run(
            ["docker", "run", "--rm", "--runtime", "runc", tag, "bash", "-c", probe],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout.split()
        for name, tag in stock_bases.items()
    }
    assert seen == {"bookworm-minimal": ["/usr/bin/python3"], "bookworm-no-python": []}


@pytest.mark.parametrize(("base", "agent"), MATRIX, ids=[f"{b}-{a}" for b, a in MATRIX])
def test_each_agent_installs_on_a_stock_base_and_answers_the_scripted_model(
    base, agent, stock_bases, model_server, monkeypatch
):
    monkeypatch.setenv("PIER_AGENT_LAYERS", "false")  # every run installs in its sandbox
    get_settings.cache_clear()
    case = FIRST_CASE[agent]
    key = f"sk-pier-base-{agent}-{uuid.uuid4().hex}"
    env = {case.key_env: key, case.base_env: model_server.url + case.base_suffix}

    text = runbook_text(case)
    if (
        base == "bookworm-no-python"
    ):  # pier's built-in checks run on python3, which the image has not at first
        text = "\n".join(line for line in text.splitlines() if not line.startswith("checks:")) + "\n"
    record = start(text, stock_bases[base], env)

    log = "\n".join(e.line for e in Services(get_settings()).store.events(record.trajectory_id))
    assert record.success, (record.error, log[-3000:])
    assert (run_folder(record) / "results" / "answer.md").read_text() == ANSWER_TEXT
    assert f"pier: {agent} " in log and " installed" in log
    if agent == "hermes":
        # No uv and no ensurepip in the image: the venv came from uv's wheel, fetched by the installer.
        assert "no uv in the image; fetching uv's pinned wheel from PyPI" in log
        assert "ensurepip is not available" not in log
    if base == "bookworm-no-python" and agent == "hermes":
        assert "the image has no python3; installing it with apt-get" in log
    else:
        assert "the image has no python3" not in log
    assert {c.credential for c in model_server.model_calls()} == {key}


@pytest.mark.parametrize(
    ("base", "says"),
    [
        ("bookworm-no-python", "pier: hermes needs python3 and 'apt-get install python3' failed"),
        (
            "bookworm-minimal",
            "uv could not be fetched from PyPI and 'apt-get install python3.11-venv' failed",
        ),
    ],
    ids=["no-python", "no-venv"],
)
def test_with_no_network_the_install_stops_naming_what_is_missing(base, says, stock_bases):
    """hermes's installer on a stock base with no network at all (no PyPI for uv,
    no Debian mirror for apt): it stops, exit 1, with one line saying what it
    needed and which way to get it failed, not pip's or apt's traceback."""
    from pier.agents.hermes import HermesAgent
    from pier.agents.install import install_script

    done = subprocess.run(
        ["docker", "run", "--rm", "--runtime", "runc", "--network", "none", stock_bases[base],
         "bash", "-c", install_script(HermesAgent.install_spec)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert says in done.stdout, done.stdout[-2000:]
    assert "Traceback" not in done.stdout + done.stderr
