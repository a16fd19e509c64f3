"""The Docker backend against the sandbox conformance suite, on a real engine."""

from __future__ import annotations

import pytest

from pier.sandbox.conformance import CHECKS, run_check

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("name", list(CHECKS))
def test_the_docker_backend_conforms(name, docker_backend, base_image):
    result = run_check(name, docker_backend, base_image)
    assert result.status == "passed", result.detail
