"""`pier CMD ...` builds only CMD's click command (typer reads each command
function's signature to build one: for a command that only reads, building all
of them was a good part of its start-up), and answers exactly as the whole tree."""

from __future__ import annotations

import pytest
import typer.main

from pier.cli import app


@pytest.fixture
def built(monkeypatch) -> list[str]:
    """The names of the click commands typer builds."""
    names: list[str] = []
    real = typer.main.get_command_from_info

    def spy(command_info, **kwargs):
        names.append(command_info.name)
        return real(command_info, **kwargs)

    monkeypatch.setattr(typer.main, "get_command_from_info", spy)
    return names


def call(argv: list[str], capsys, command=app) -> tuple[int, str, str]:
    try:
        command(argv, prog_name="pier")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    else:
        code = 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("argv", "only"),
    [(["runs", "--help"], ["runs"]), (["routine", "list", "--help"], ["list"])],
    ids=" ".join,
)
def test_a_command_builds_only_itself(argv, only, built, capsys):
    assert call(argv, capsys)[0] == 0
    assert built == only


ARGVS = [
    ["runs", "--help"],
    ["runs", "--bogus"],
    ["logs"],
    ["routine", "--help"],
    ["routine", "list", "--help"],
    ["routine", "lst"],
    ["rns"],
    ["--help"],
    [],
]


@pytest.mark.parametrize("argv", ARGVS, ids=lambda argv: " ".join(argv) or "(none)")
def test_the_output_is_the_whole_tree_s(argv, capsys):
    whole = call(argv, capsys, typer.main.get_command(app))  # the whole tree, as typer builds it
    assert call(argv, capsys) == whole
    assert whole[1] + whole[2]
