"""A run's log lines into the store, gathered: one write for many lines.

Every line of a run's log (pier's own and the agent's output) was its own write
transaction, made in the thread that said it, and under SQLite every run of a
server waits for the one writer: an agent printing a thousand lines a second
cost a thousand transactions a second, and its output's reader waited for each.
Lines now go in as a database's group commit does, with no delay added: a
writer thread of the run's writes whatever is pending at once; while it writes,
the lines that come are gathered, and its next write takes them all, in one
transaction. A quiet run writes each line as it comes, as before; a chatty one
writes as often as the store can take a write, each with as many lines as came
meanwhile.

The live view (the CLI's console, a server's followers, who read the store
when told) is handed each line once it is stored, in order. The runner waits
for the pending lines at the end of every stage, and the run's record is saved
only after its lines are stored. A write that fails is raised in the run's own
thread at its next line, as a failed write always was (a stage's end and a
record's save never raise it: the record is saved either way); the thread ends after IDLE_EXIT_S without a line and starts again
with the next."""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import groupby

IDLE_EXIT_S = 5.0

Write = Callable[[list[str], str], object]  # (lines, stage): one transaction; what it returns is unused
Stored = Callable[[str, str], None]  # (stage, line), after it is stored


class RunLogWriter:
    def __init__(self, write: Write, stored: Stored | None = None):
        self._write, self._stored = write, stored
        self._pending: list[tuple[str, str]] = []
        self._busy = False  # a write is under way
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self.writes = 0  # transactions made (benchmarks and tests read it)

    def __call__(self, stage: str, line: str) -> None:
        self._raise_kept()
        with self._cond:
            self._pending.append((stage, line))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pier-run-log", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, raise_error: bool = True) -> None:
        """Wait until every line said so far is stored (or its write failed);
        raise a failed write's error unless raise_error is False (it is kept
        for the next line or flush then)."""
        with self._cond:
            while self._pending or self._busy:
                self._cond.wait()
        if raise_error:
            self._raise_kept()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    if not self._cond.wait(IDLE_EXIT_S) and not self._pending:
                        self._thread = None  # the next line starts another
                        return
                lines, self._pending = self._pending, []
                self._busy = True
            try:
                self._store(lines)
            except BaseException as exc:  # raised in the run's thread
                self._error = exc
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _store(self, lines: list[tuple[str, str]]) -> None:
        for stage, group in groupby(lines, key=lambda item: item[0]):
            texts = [line for _stage, line in group]
            self._write(texts, stage)
            self.writes += 1
            if self._stored is not None:
                for text in texts:
                    self._stored(stage, text)

    def _raise_kept(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error
