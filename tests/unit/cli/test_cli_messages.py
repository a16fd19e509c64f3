"""Errors that say what to do: `pier serve` on a port in use, and help that does
not show a value after a flag."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from typer.testing import CliRunner

from pier.cli import app

runner = CliRunner()


def test_serve_on_a_port_in_use_fails_before_its_start_up_with_a_hint(pier_home):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pier.cli", "serve", "--port", str(port)],
            env={**os.environ, "PIER_HOME": str(pier_home)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        taken.close()
    assert done.returncode == 1, done.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in done.stderr
    assert f"pier serve --port {port + 1}" in done.stderr
    assert "Errno 98" not in done.stderr
    # None of the start-up work ran: no store was made, no sweep or re-queue logged.
    assert not (pier_home / "pier.db").exists() and "sweep" not in done.stderr.lower(), done.stderr
    assert time.monotonic() - started < 30


def test_help_shows_no_type_after_a_flag():
    shown = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "160"}).output
    assert "<bool>" not in shown, shown
    # plain help (`  --var NAME=VALUE ...`) or rich panels (`│ --var ...`)
    options = (line.strip().lstrip("│").strip() for line in shown.splitlines())
    lines = {line.split()[0]: line for line in options if line.startswith("--")}
    assert "NAME=VALUE" in lines["--var"] and "<int>" in lines["--timeout"], lines


def test_serve_on_a_port_past_65535_is_a_usage_error_not_a_traceback(pier_home):
    result = runner.invoke(app, ["serve", "--port", "99999"])
    assert result.exit_code == 2, result.output
    assert "--port" in result.output and "65535" in result.output
    assert "Traceback" not in result.output and "OverflowError" not in result.output
