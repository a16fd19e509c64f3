"""What an agent printed reaches the user's terminal as text, never as terminal
control: `pier logs` and the live view escape CSI, OSC 8, carriage returns and
every other C0/C1 control; the stored log keeps the line as it was."""

from __future__ import annotations

import io

from rich.console import Console
from typer.testing import CliRunner

from pier import cli
from pier.cli.progress import Progress
from pier.lifecycle.start import Services
from pier.record import Trajectory

HOSTILE = (
    "click \x1b]8;;https://evil.example/\x07here\x1b]8;;\x07 \x1b[2J\x1b[31mred\rOVERWRITE"
    "\x9b6n\x07\x08\u202etxt.exe \x1b]52;c;cm0gLXJmIH4=\x07"
)


def controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) < 0xA0 or c == "\u202e"]


def test_pier_logs_escapes_control_sequences_and_the_store_keeps_them():
    record = Trajectory.new("b" * 32, "local", "hello")
    store = Services().store
    store.create_run(record)
    store.append_event(record.trajectory_id, HOSTILE, "run_agent")
    result = CliRunner().invoke(cli.app, ["logs", record.trajectory_id])
    assert result.exit_code == 0, result.output
    assert controls(result.output) == []
    assert "\\e]8;;https://evil.example/\\x07here" in result.output and "\\rOVERWRITE" in result.output
    assert store.events(record.trajectory_id)[0].line == HOSTILE


def test_the_live_view_escapes_them_too():
    buffer = io.StringIO()
    progress = Progress(Console(file=buffer, force_terminal=True, color_system=None))
    progress.on_log("run_agent", HOSTILE)
    assert controls(buffer.getvalue()) == []
    assert "\\e[2J" in buffer.getvalue()
