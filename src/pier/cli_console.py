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
            from rich.console import Console

            self._console = Console(stderr=self._stderr)
        return getattr(self._console, name)


# What an agent prints must not steer the terminal that shows it: escape sequences
# (CSI colours and cursor moves, OSC 8 hyperlinks, OSC 52 clipboard writes), a
# carriage return that overwrites the line, every other C0 and C1 control, and
# the Unicode controls that reorder or break a line, are shown as escapes instead.
_SHOWN = {ord("\r"): "\\r", 0x1B: "\\e", 0x7F: "\\x7f"}
_TERMINAL_SAFE = {
    **{c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), *range(0x80, 0xA0)] if c not in (0x09, 0x0A)},
    **{c: f"\\u{c:04x}" for c in [0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]},
    **_SHOWN,
}


def terminal_safe(line: str) -> str:
    """line as text a terminal only shows (the stored log keeps it as it was)."""
    return line.translate(_TERMINAL_SAFE)


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
