"""Integration tests run on a real Docker engine with a local image (no registry:
scripts/build-test-image.sh builds pier-base:bookworm). Where there is no engine
they skip, except under CI=true, where that is a failure (tests/support/services.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.model_server import ModelServer, bridge_gateway
from tests.support.runtimes import SANDBOX_RUNTIMES
from tests.support.services import require_service

from pier.errors import SandboxError
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import Settings

TEST_IMAGE_ENV = "PIER_TEST_IMAGE"
DEFAULT_TEST_IMAGE = "pier-base:bookworm"
BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build-test-image.sh"


HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/integration is an integration test, marked or not,
    so `pytest -m "not integration"` runs the unit tests alone (a folder whose
    files forgot `pytestmark` ran its 1,000-run fleet test with them)."""
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def docker_backend() -> Iterator[DockerBackend]:
    """A DockerBackend on the engine DOCKER_HOST (or the local socket) names."""
    backend = DockerBackend(Settings())
    try:
        backend.ping()
    except SandboxError as exc:
        require_service("Docker", str(exc))
    yield backend


@pytest.fixture(scope="session")
def base_image(docker_backend: DockerBackend) -> str:
    """The local image integration tests run on ($PIER_TEST_IMAGE)."""
    image = os.environ.get(TEST_IMAGE_ENV, DEFAULT_TEST_IMAGE)
    if not docker_backend.image_exists(image) and shutil.which("debootstrap") and os.geteuid() == 0:
        # A fresh machine: build it once (about a minute), as scripts/build-test-image.sh would.
        subprocess.run(["bash", str(BUILD_SCRIPT)], env={**os.environ, TEST_IMAGE_ENV: image}, check=False)
    if not docker_backend.image_exists(image):
        require_service(
            f"the test image {image}", "run scripts/build-test-image.sh (needs debootstrap, as root)"
        )
    return image


@pytest.fixture(scope="session")
def agent_image(docker_backend: DockerBackend, base_image: str) -> str:
    """base_image plus Node and every pinned agent CLI, installed once by pier's
    own install code (and kept by tag, so it is reused while the pins stay)."""
    from tests.support.agent_image import build_agent_image

    from pier.agents import CLI_AGENTS, get_agent

    specs = [get_agent(name).install_spec for name in CLI_AGENTS]  # type: ignore[attr-defined]
    return build_agent_image(docker_backend, base_image, specs, log=lambda line: None)


@pytest.fixture(scope="session")
def model_server_session(docker_backend: DockerBackend) -> Iterator[ModelServer]:
    server = ModelServer(bridge_gateway(docker_backend.api)).start()
    yield server
    server.stop()


# Each provider's endpoint variable, as the tests point it at the scripted server.
MODEL_SERVER_ENDPOINTS = {"ANTHROPIC_BASE_URL": "", "OPENAI_BASE_URL": "/v1", "OPENROUTER_BASE_URL": "/api/v1",
                          "GOOGLE_GEMINI_BASE_URL": ""}  # fmt: skip


@pytest.fixture
def model_server(model_server_session: ModelServer, monkeypatch: pytest.MonkeyPatch) -> ModelServer:
    """The scripted model server, its request log emptied for this test, and
    made the operator's upstream for every provider: pier's own environment
    names it (a run's may name only what the operator did, pier.agents.upstreams)."""
    model_server_session.clear()
    for variable, suffix in MODEL_SERVER_ENDPOINTS.items():
        monkeypatch.setenv(variable, model_server_session.url + suffix)
    return model_server_session


@pytest.fixture(scope="session", params=SANDBOX_RUNTIMES)
def sandbox_runtime(request: pytest.FixtureRequest, docker_backend: DockerBackend) -> str:
    """Each runtime of SANDBOX_RUNTIMES the engine has, by name."""
    name = str(request.param)
    if name not in docker_backend.facts.runtimes:
        require_service(
            f"the {name} runtime",
            "install runsc and register it in /etc/docker/daemon.json (docs/runtime.md)",
        )
    return name


@pytest.fixture
def on_runtime(sandbox_runtime: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """pier's settings (get_settings, and so every run) use sandbox_runtime."""
    from pier.settings import get_settings

    monkeypatch.setenv("PIER_SANDBOX_RUNTIME", sandbox_runtime)
    get_settings.cache_clear()
    return sandbox_runtime
