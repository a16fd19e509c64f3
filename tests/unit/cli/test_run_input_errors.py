"""Bad input to `pier run`, whatever finds it before a sandbox exists, exits 2
with one clean line naming what to change; never a traceback or a raw log line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import BaseModel, Field, ValidationError
from typer.testing import CliRunner

from pier import cli
from pier.record import RunStatus, Trajectory

runner = CliRunner()


@pytest.fixture
def runbook(tmp_path: Path) -> Path:
    path = tmp_path / "RUNBOOK.md"
    path.write_text("---\nagent: script\n---\n```bash\ntrue\n```\n")
    return path


class _Limits(BaseModel):
    memory: str = Field(min_length=2)


def a_validation_error() -> ValidationError:
    try:
        _Limits(memory="1")
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


def test_a_validation_error_from_preflight_is_exit_2_naming_the_option(runbook, monkeypatch):
    def refuse(request, settings):
        raise a_validation_error()

    monkeypatch.setattr("pier.lifecycle.start.preflight", refuse)  # pier.cli.run imports it on use
    result = runner.invoke(cli.app, ["run", str(runbook), "--memory", "64M"])
    assert result.exit_code == 2, result.output
    assert "error: --memory: String should have at least 2 characters" in result.output
    assert "Traceback" not in result.output and "validation error" not in result.output


def test_a_bad_setting_is_exit_2_naming_the_variable(runbook, monkeypatch):
    monkeypatch.setenv("PIER_MAX_CONCURRENT_RUNS", "0")
    result = runner.invoke(cli.app, ["run", str(runbook)])
    assert result.exit_code == 2, result.output
    assert (
        "PIER_MAX_CONCURRENT_RUNS='0' is not allowed: Input should be greater than or equal to 1"
        in result.output
    )


def test_library_warnings_do_not_print_between_the_progress_lines(runbook, monkeypatch):
    emitted = []

    def noisy_run(services, request, observer=None):
        # what creation.py logs on a retried create, which printed raw on stderr
        emitted.append(logging.getLogger("pier.sandbox.creation").isEnabledFor(logging.WARNING))
        return Trajectory.new(request.trajectory_id, "local", "t", status=RunStatus.failed, success=False)

    monkeypatch.setattr("pier.lifecycle.start.run", noisy_run)
    result = runner.invoke(cli.app, ["run", str(runbook), "--json"])
    assert result.exit_code == 1
    assert emitted == [False]
    assert logging.getLogger("pier.sandbox.creation").isEnabledFor(logging.WARNING), "restored after"
