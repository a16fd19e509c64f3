"""One exit-code table for every command (docs/cli.md, "Exit codes"): every
command of the CLI has its row, and each command exits as its row says, for a
case of each code (`pier logs` exited 1 for an id no run has and 2 for a prefix
of several: both name no one run, and both exit 1 now)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pier import cli
from pier.lifecycle.start import Services
from pier.record import Trajectory

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()
CODES = ("0", "1", "2")


def table() -> dict[str, dict[str, str]]:
    """Command -> code -> what the table says it means ("" where it says nothing)."""
    text = (ROOT / "docs" / "cli.md").read_text()
    section = text[text.index("## Exit codes") :]
    rows: dict[str, dict[str, str]] = {}
    for line in section.splitlines():
        if not line.startswith("| `pier"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == 4, line
        group = ""
        for name in re.findall(r"`([^`]+)`", cells[0]):
            if name.startswith("pier "):
                words = name.split()[1:]
                group = words[0] if len(words) > 1 else ""
                command = " ".join(words)
            else:
                command = f"{group} {name}"
            rows[command] = dict(zip(CODES, cells[1:], strict=True))
    return rows


def commands() -> list[str]:
    names = [c.name for c in cli.app.registered_commands]
    for group in cli.app.registered_groups:
        names += [f"{group.name} {c.name}" for c in group.typer_instance.registered_commands]
    return names


def test_every_command_has_a_row_and_every_row_a_command():
    rows = table()
    assert sorted(rows) == sorted(commands())
    for command, meanings in rows.items():
        assert all(meanings[code] not in ("", "—") for code in CODES), (command, meanings)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "good.md").write_text("---\nagent: script\n---\n```bash\necho hi > {{results_dir}}/x\n```\n")
    (tmp_path / "notes.md").write_text("Just some notes, no frontmatter.\n")
    return tmp_path


def two_runs() -> None:
    store = Services().store
    store.create_run(Trajectory.new("ab" + "0" * 30, "local", "t"))
    store.create_run(Trajectory.new("ab" + "1" * 30, "local", "t"))


CASES = [
    (["runs"], 0),
    (["runs", "--limit", "many"], 2),
    (["logs", "nosuchrun"], 1),
    (["logs", "ab"], 1),  # a prefix of two runs' ids
    (["logs", "ab" + "0" * 30], 0),
    (["logs", "--no-such-option", "x"], 2),
    (["validate", "{files}/good.md"], 0),
    (["validate", "{files}/notes.md"], 1),
    (["validate", "{files}/missing.md"], 1),
    (["run", "{files}/missing.md"], 2),
    (["run", "{files}/notes.md"], 2),
    (["run", "{files}/good.md", "--cpus", "999"], 2),
    (["collection", "create", "a/b"], 2),
    (["collection", "list"], 0),
    (["task", "list", "--collection", "nope"], 1),
    (["task", "push", "{files}/missing.md", "--collection", "local"], 2),
    (["routine", "delete", "nope", "t", "r"], 1),
    (["routine", "list"], 0),
    (["experiment", "show", "nope"], 1),
    (["experiment", "list"], 0),
    (["snapshot", "list"], 1),  # no engine answers here
    (["snapshot", "build", "nosuch"], 1),
    (["storage", "where"], 0),
    (["audit", "verify"], 0),
]


@pytest.mark.parametrize(("argv", "code"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_each_command_exits_as_its_row_says(argv, code, files, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{files / 'no-engine.sock'}")  # nothing here needs one
    two_runs()
    argv = [arg.replace("{files}", str(files)) for arg in argv]
    done = runner.invoke(cli.app, argv)
    assert done.exit_code == code, (argv, done.output)
    command = " ".join(argv[:2]) if " ".join(argv[:2]) in table() else argv[0]
    assert table()[command][str(code)], (command, code)  # the row says what this code means
