"""The Docker backend against the sandbox conformance suite, on a real engine,
on every OCI runtime it runs sandboxes on (runc, and gVisor's runsc)."""

from __future__ import annotations

import pytest
from tests.support.runtimes import runtime_setting

from pier.sandbox.conformance import CHECKS, run_check
from pier.sandbox.docker.backend import DockerBackend
from pier.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def runtime_backend(sandbox_runtime: str) -> DockerBackend:
    return DockerBackend(Settings(sandbox_runtime=runtime_setting(sandbox_runtime)))


@pytest.mark.parametrize("name", list(CHECKS))
def test_the_docker_backend_conforms(name, runtime_backend, base_image):
    result = run_check(name, runtime_backend, base_image)
    assert result.status == "passed", result.detail
