"""`pier runs`: a header, and times that say their zone."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime

from rich.console import Console
from typer.testing import CliRunner

from pier import cli
from pier.cli import console as cli_console
from pier.cli import runs
from pier.lifecycle.start import Services
from pier.record import Trajectory

runner = CliRunner()
ZONED = re.compile(r"2026-03-01 \d\d:\d\d:05[+-]\d\d:\d\d")


def stored_run() -> Trajectory:
    record = Trajectory.new("a" * 32, "local", "hello", created=datetime(2026, 3, 1, 12, 30, 5, tzinfo=UTC))
    Services().store.create_run(record)
    return record


def test_piped_runs_start_with_a_header_and_show_zoned_times():
    stored_run()
    result = runner.invoke(cli.app, ["runs"])
    assert result.exit_code == 0, result.output
    header, row = result.output.splitlines()
    assert header.split("\t") == ["run", "collection/task", "status", "success", "created", "duration"]
    assert row.startswith("a" * 32 + "\tlocal/hello\tpending")
    assert ZONED.search(row.split("\t")[4]), row


def test_the_table_shows_zoned_times(monkeypatch):
    stored_run()
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=200, color_system=None)
    monkeypatch.setattr(runs, "out", console)
    monkeypatch.setattr(cli_console, "out", console)
    result = runner.invoke(cli.app, ["runs"])
    assert result.exit_code == 0, result.output
    assert "created" in screen.getvalue() and ZONED.search(screen.getvalue()), screen.getvalue()


def test_a_narrow_terminal_never_cuts_the_id(monkeypatch):
    stored_run()
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=80, color_system=None)
    monkeypatch.setattr(runs, "out", console)
    monkeypatch.setattr(cli_console, "out", console)
    assert runner.invoke(cli.app, ["runs"]).exit_code == 0
    assert "a" * 32 in screen.getvalue(), screen.getvalue()


def test_an_id_prefix_finds_its_run_and_an_ambiguous_one_lists_the_matches():
    stored_run()
    Services().store.create_run(Trajectory.new("ab" + "0" * 30, "local", "hello"))
    found = runner.invoke(cli.app, ["logs", "aaaa"])
    assert found.exit_code == 0, found.output
    ambiguous = runner.invoke(cli.app, ["logs", "a"], env={"COLUMNS": "300"})
    assert ambiguous.exit_code == 1  # names no one run, as an unknown id (docs/cli.md, exit codes)
    assert "'a' is the start of more than one run's id (" + "a" * 32 + ", ab" in ambiguous.output
    missing = runner.invoke(cli.app, ["logs", "zz"])
    assert missing.exit_code == 1 and "run 'zz' not found" in missing.output


def test_local_time_is_the_same_moment_with_an_offset():
    moment = datetime(2026, 3, 1, 12, 30, 5, tzinfo=UTC)
    shown = runs.local_time(moment)
    assert datetime.fromisoformat(shown) == moment
    assert datetime.fromisoformat(runs.local_time(moment.replace(tzinfo=None))) == moment


def test_runs_json_gives_each_records_id_and_outcome_at_the_top_and_raw_the_trajectory():
    """`pier runs --json | jq -r .id` gives the ids (it gave null: the id was nested)."""
    import json
    import shutil
    import subprocess

    record = stored_run()
    result = runner.invoke(cli.app, ["runs", "--json"])
    assert result.exit_code == 0, result.output
    line = json.loads(result.output.splitlines()[0])
    assert list(line)[:7] == ["id", "status", "success", "collection", "task", "created", "duration_seconds"]
    assert (line["id"], line["status"], line["collection"], line["task"]) == (
        record.trajectory_id,
        "pending",
        "local",
        "hello",
    )
    assert line["created"] == "2026-03-01T12:30:05Z" and line["success"] is None
    assert line["trajectory_id"] == record.trajectory_id and "steps" in line  # the trajectory follows
    if shutil.which("jq"):
        ids = subprocess.run(
            ["jq", "-r", ".id"], input=result.output, capture_output=True, text=True, check=True
        )
        assert ids.stdout.split() == [record.trajectory_id]
    raw = json.loads(runner.invoke(cli.app, ["runs", "--json", "--raw"]).output.splitlines()[0])
    assert "id" not in raw and raw["trajectory_id"] == record.trajectory_id and raw["name"] == "hello"
