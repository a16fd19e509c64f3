"""`pier sandbox check` runs the conformance suite on the configured backend."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.sandbox import register_backend
from pier.sandbox.fake import FAKE_IMAGE, FakeBackend, FakeEngine
from pier.settings import get_settings

runner = CliRunner()


@pytest.fixture
def backend_named(monkeypatch):
    monkeypatch.setattr("pier.sandbox._registered", {})

    def use(name: str, **fake: object) -> None:
        register_backend(name, lambda settings: FakeBackend(settings, engine=FakeEngine(), **fake))  # type: ignore[arg-type]
        monkeypatch.setenv("PIER_SANDBOX_BACKEND", name)
        get_settings.cache_clear()

    return use


def test_a_conforming_backend_passes(backend_named):
    backend_named("fake-processes", processes=True)
    result = runner.invoke(app, ["sandbox", "check", "--image", FAKE_IMAGE, "--only", "exec_env"])
    assert result.exit_code == 0, result.output
    assert "backend fake" in result.output and "passed  exec_env" in result.output


def test_a_failing_check_exits_1_with_its_reason(backend_named):
    backend_named("fake-scripted")  # answers commands without running them
    result = runner.invoke(app, ["sandbox", "check", "--image", FAKE_IMAGE, "--only", "exec_env"])
    assert result.exit_code == 1
    assert "failed  exec_env  env not applied" in result.output and "1 check(s) failed" in result.output


def test_an_unknown_check_is_named():
    result = runner.invoke(app, ["sandbox", "check", "--only", "nope"])
    assert result.exit_code == 2 and "no check named nope" in result.output
