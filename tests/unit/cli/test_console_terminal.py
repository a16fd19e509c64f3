"""The CLI's consoles tell a pipe from a terminal without loading rich, and
answer exactly as rich does: a terminal, TTY_COMPATIBLE and FORCE_COLOR included."""

from __future__ import annotations

import io
import itertools
import sys

import pytest
from rich.console import Console

from pier.cli import console


class Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


SETTINGS = list(itertools.product((None, "", "0", "1"), (None, "", "1"), (False, True)))


@pytest.mark.parametrize(("tty_compatible", "force_color", "tty"), SETTINGS)
def test_is_terminal_is_rich_s_answer(monkeypatch, tty_compatible, force_color, tty):
    for name, value in (("TTY_COMPATIBLE", tty_compatible), ("FORCE_COLOR", force_color)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    stream = Stream(tty)
    monkeypatch.setattr(sys, "stdout", stream)
    rich_says = Console(file=stream).is_terminal
    if console.plainly_no_terminal(stream):
        assert rich_says is False
    assert console.LazyConsole().is_terminal is rich_says


def test_a_pipe_is_told_without_rich(monkeypatch):
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setattr(sys, "stdout", Stream(False))
    lazy = console.LazyConsole()
    assert lazy.is_terminal is False
    assert lazy._console is None  # no rich console was made


@pytest.mark.parametrize("text", ["no routines", "no [bold]tasks[/bold]", "a :smile: b"])
def test_say_writes_what_rich_writes(monkeypatch, text):
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    by_rich, by_say = Stream(False), Stream(False)
    monkeypatch.setattr(sys, "stderr", by_rich)
    console.make_console(stderr=True).print(text, highlight=False)
    monkeypatch.setattr(sys, "stderr", by_say)
    monkeypatch.setattr(console, "err", console.LazyConsole(stderr=True))
    console.say(text)
    assert by_say.getvalue() == by_rich.getvalue()
