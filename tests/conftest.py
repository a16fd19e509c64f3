from __future__ import annotations

import os
from pathlib import Path

import pytest

from pier.settings import get_settings
from tests.support.services import require_service

# pier's default runtime is `auto` (gVisor where registered). The tests of what
# does not depend on the runtime pin runc (here, before any session fixture
# makes a backend), so the suite's time stays what it was; the isolation and
# conformance tests run on each runtime (tests/support/runtimes.py), and those
# of the default itself unset it (tests/integration/test_default_snapshot.py).
os.environ.setdefault("PIER_SANDBOX_RUNTIME", "runc")

SHARED = Path(os.environ.get("PIER_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
CORPUS = SHARED / "corpus" / "agent-runbooks"


def corpus_or_skip() -> Path:
    """The corpus of real runbooks: extra data kept outside the repository, so a
    clone alone skips the tests that read it; under CI=true they fail."""
    if not CORPUS.is_dir():
        require_service(
            "the runbook corpus",
            f"{CORPUS} does not exist: set PIER_SHARED_DIR to the folder holding corpus/",
        )
    return CORPUS


@pytest.fixture(autouse=True)
def pier_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own PIER_HOME, so nothing touches the user's state."""
    home = tmp_path_factory.mktemp("pier-home")
    monkeypatch.setenv("PIER_HOME", str(home))
    # A `pier run` started by a test runs in its own process: no resident is
    # started or used (tests/unit/cli/test_resident.py turns it on).
    monkeypatch.setenv("PIER_RESIDENT", "false")
    # `pier validate` asks an image's registry only where a test says so (a
    # local one): never a public registry from a test.
    monkeypatch.setenv("PIER_IMAGE_LOOKUP_REGISTRY", "false")
    get_settings.cache_clear()
    yield home
    get_settings.cache_clear()
