"""The CLI's two consoles, made on first use.

`rich` costs a noticeable slice of a `pier` call's start-up; `pier --help` and
the commands that print plain lines never touch it, so the consoles are built
only when something is printed through them.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, cast

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

    @property
    def is_terminal(self) -> bool:
        """rich's answer; a pipe is told apart without loading rich (a list piped
        to grep prints plain lines and never needs it)."""
        if self._console is None and plainly_no_terminal(sys.stderr if self._stderr else sys.stdout):
            return False
        return bool(self.__getattr__("is_terminal"))


def plainly_no_terminal(stream: IO[str]) -> bool:
    """True where rich's Console.is_terminal is sure to be False for `stream`:
    TTY_COMPATIBLE=0, an empty FORCE_COLOR, or, without either variable, a
    stream that is no TTY. False only means: ask rich (a TTY may still be
    Jupyter's or IDLE's, which rich counts as none)."""
    tty_compatible = os.environ.get("TTY_COMPATIBLE", "")
    if tty_compatible in ("0", "1"):
        return tty_compatible == "0"
    force_color = os.environ.get("FORCE_COLOR")
    if force_color is not None:
        return force_color == ""
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):  # rich: no isatty, or a closed file, is no terminal
        return True


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


# Wide enough that no table column is ever cut in a pipe, narrow enough to lay out.
PIPE_WIDTH = 4096


def make_console(stderr: bool) -> Console:
    """A console that wraps only on a terminal: piped output (a file, grep, a CI
    log) keeps each line whole, whatever COLUMNS says. A reader that goes away
    (`| head`) only silences it: rich's own answer, SystemExit(1), would end a
    run in the middle and change its exit code."""
    from rich.console import Console

    class PipeSafeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            silence(self.file)

    console = PipeSafeConsole(stderr=stderr)
    if not console.is_terminal:
        console = PipeSafeConsole(stderr=stderr, soft_wrap=True, width=PIPE_WIDTH)
    return console


def silence(stream: IO[str]) -> None:
    """Point a closed stream at /dev/null: what is still written to it (and the
    flush at exit) succeeds unseen, instead of raising BrokenPipeError."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def emit(text: str) -> bool:
    """Print one line to stdout; False once the reader is gone (then stop)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        silence(sys.stdout)
        return False
    return True


@atexit.register
def _flush_or_silence() -> None:
    """The last flush of a closed pipe must not turn a finished command's exit
    code into 120 ("Exception ignored ... BrokenPipeError")."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            silence(stream)


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


def say(text: str) -> None:
    """A plain message on stderr, as `err.print(text, highlight=False)` shows it.
    Text without markup or emoji codes goes to a stream that is no terminal as
    it is (what rich would write), without loading rich."""
    if "[" in text or ":" in text or not plainly_no_terminal(sys.stderr):
        err.print(text, highlight=False)
        return
    try:
        print(text, file=sys.stderr, flush=True)
    except BrokenPipeError:
        silence(sys.stderr)


def show_list(
    columns: tuple[str, ...], rows: list[list[str]], as_json: bool, items: list[Any], empty: str = ""
) -> None:
    """A list command's output, the same way for every list:
    --json: one JSON object per line (JSON Lines: `jq` reads it, `wc -l` counts it);
    a terminal: a table; a pipe: a header and tab-separated rows of whole values
    (nothing cut or wrapped), for grep, cut and awk."""
    if as_json:
        for item in items:
            if not emit(item.model_dump_json() if hasattr(item, "model_dump_json") else _json(item)):
                return
        return
    if not rows and empty:
        say(empty)
        return
    if not out.is_terminal:
        for row in [list(columns), *rows]:
            if not emit("\t".join(cell.replace("\t", " ").replace("\n", " ") for cell in row)):
                return
        return
    from rich.table import Column, Table

    # The first column is the name or id a later command takes: never cut it.
    first = Column(columns[0], no_wrap=True, min_width=max((len(row[0]) for row in rows), default=0))
    table = Table(first, *columns[1:])
    for row in rows:
        table.add_row(*row)
    out.print(table)


def _json(item: Any) -> str:
    import json

    return json.dumps(item, default=str)


def run_id(store: Any, given: str) -> str:
    """The trajectory id `given` names: the id itself, or the one run whose id
    starts with it. An id no run has, and a prefix of several (listed), exit 1:
    each names no one run (docs/cli.md, exit codes)."""
    from pier.errors import NotFoundError

    try:
        return str(store.get_run(given).trajectory_id)
    except NotFoundError:
        pass
    matches = store.run_ids_starting(given, limit=11) if given else []
    if len(matches) == 1:
        return str(matches[0])
    if not matches:
        raise fail(f"run {given!r} not found: check the trajectory id (`pier runs` lists them)", code=1)
    shown = ", ".join(matches[:10]) + (", ..." if len(matches) > 10 else "")
    raise fail(f"{given!r} is the start of more than one run's id ({shown}): give more of it", code=1)


@dataclass
class AuditNote:
    """What a change names once it is known (the id of what it created, the
    collection of what it found)."""

    object_id: str | None = None
    collection: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)  # names only, added to the entry's target


@contextmanager
def audited(
    store: Any, action: str, collection: str | None = None, object_id: str | None = None
) -> Iterator[AuditNote]:
    """A change a command makes on this machine's store goes in its audit log
    as the API's do (actor `cli:<user>@<host>`, source cli), however it ends:
    done (200), refused (422 bad input, 404 not found, 409 other), failed (500).
    The body may set the object's id it learns (`with audited(...) as note`)."""
    from pier.errors import NotFoundError

    status = 200
    note = AuditNote(object_id, collection)
    try:
        yield note
    except InputError:
        status = 422
        raise
    except NotFoundError:
        status = 404
        raise
    except PierError:
        status = 409
        raise
    except BaseException:
        status = 500
        raise
    finally:
        _record_cli_change(store, action, status, note.collection, note.object_id, note.detail)


def _record_cli_change(
    store: Any,
    action: str,
    status: int,
    collection: str | None,
    object_id: str | None,
    detail: dict[str, Any] | None = None,
) -> None:
    import getpass
    import socket

    from pier.db.schemas import AuditEntry, outcome_of
    from pier.record import utcnow

    try:
        user = getpass.getuser()
    except Exception:  # no name for this uid
        user = str(os.getuid())
    entry = AuditEntry(
        at=utcnow(), collection=collection, actor=f"cli:{user}@{socket.gethostname()}", action=f"cli {action}",
        target={**({"collection": collection} if collection else {}), **(detail or {})}, status=status,
        client="local",
        object_id=object_id, outcome=outcome_of(status), source="cli",
    )  # fmt: skip
    try:
        store.add_audit(entry)
    except Exception as exc:  # the change is made; an audit write that fails must be seen, not raised
        say(f"warning: the audit log did not record `{action}` ({type(exc).__name__}: {exc})")
