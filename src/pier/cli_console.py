"""The CLI's two consoles, made on first use.

`rich` costs a noticeable slice of a `pier` call's start-up; `pier --help` and
the commands that print plain lines never touch it, so the consoles are built
only when something is printed through them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

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


# Typed as what they stand in for: every caller may treat them as Consoles.
out = cast("Console", LazyConsole())
err = cast("Console", LazyConsole(stderr=True))
