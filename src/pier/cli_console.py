"""The CLI's two consoles, made on first use.

`rich` costs a noticeable slice of a `pier` call's start-up; `pier --help` and
the commands that print plain lines never touch it, so the consoles are built
only when something is printed through them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import typer

from pier.errors import InputError, PierError

if TYPE_CHECKING:
    from rich.console import Console


class LazyConsole:
    """Stands in for a `rich.console.Console(stderr=...)`: every attribute is the
    real console's, which is created (once) by the first attribute read."""

    def __init__(self, stderr: bool = False):
        self._stderr = stderr
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            self._console = make_console(self._stderr)
        return getattr(self._console, name)


# Wide enough that no table column is ever cut in a pipe, narrow enough to lay out.
PIPE_WIDTH = 4096


def make_console(stderr: bool) -> Console:
    """A console that wraps only on a terminal: piped output (a file, grep, a CI
    log) keeps each line whole, whatever COLUMNS says."""
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, soft_wrap=True, width=PIPE_WIDTH)
    return console


# Typed as what they stand in for: every caller may treat them as Consoles.
out = cast("Console", LazyConsole())
err = cast("Console", LazyConsole(stderr=True))


def fail(message: str, code: int = 2) -> typer.Exit:
    """Say what went wrong on stderr; the exit to raise (2: bad input, 1: refused)."""
    err.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)


@contextmanager
def refusals() -> Iterator[None]:
    """Bad input exits 2, anything else pier refuses exits 1; both say why."""
    try:
        yield
    except InputError as exc:
        raise fail(str(exc)) from None
    except PierError as exc:
        raise fail(str(exc), code=1) from None
