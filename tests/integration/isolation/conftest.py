"""What the isolation tests share: every test runs on runc and on gVisor (runsc);
runsc is skipped where the engine has not registered it, and fails under CI=true."""

from __future__ import annotations

import pytest
from tests.support.services import require_service

from pier.settings import get_settings


@pytest.fixture(params=["runc", "runsc"])
def runtime(request, docker_backend, monkeypatch) -> str:
    name = request.param
    if name not in docker_backend.facts.runtimes:
        require_service(
            f"the {name} runtime",
            "register gVisor in the engine (daemon.json runtimes, runtimeArgs --network=host) and SIGHUP dockerd",
        )
    monkeypatch.setenv("PIER_SANDBOX_RUNTIME", name)
    get_settings.cache_clear()
    return name
