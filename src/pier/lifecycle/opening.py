"""The database opened in a thread while a run starts (`pier run`): importing
SQLAlchemy and the drivers and opening the store cost about a second of CPU,
which then overlaps the engine's work (the sandbox's create and start) instead
of coming before it. Until the store is open, the run's writes (its record,
its log lines) wait in order and are written, in that order, as soon as it is;
anything else asked of the store waits for it. Nothing is lost or reordered:
`settle` waits for every write before the command answers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pier.record import Trajectory

if TYPE_CHECKING:
    from pier.db import Store

# The writes a run makes through its store that may wait (see RunContext).
DEFERRED = frozenset({"create_run", "save_run", "append_event"})


class OpeningStore:
    """A store being opened by `open` in a thread of its own. Writes made before
    it is open are kept (records copied as they were) and made in order once it
    is; every other call waits for it. An error opening it (or making a kept
    write) is raised by the calls that follow, as the store would have."""

    def __init__(self, open: Callable[[], Store], name: str = "pier-store-open"):
        self._lock = threading.Lock()
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self._store: Store | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._open, args=(open,), name=name, daemon=True)
        self._thread.start()

    def _open(self, open: Callable[[], Store]) -> None:
        try:
            store = open()
        except BaseException as exc:  # raised again by the calls that follow
            with self._lock:
                self._error, self._pending = exc, []
            self._done.set()
            return
        with self._lock:  # a write made meanwhile waits for those kept before it
            try:
                for name, args in self._pending:
                    getattr(store, name)(*args)
            except BaseException as exc:
                self._error = exc
            else:
                self._store = store
            self._pending = []
        self._done.set()

    def settle(self) -> Store:
        """The open store, once every kept write is made; raises what failed."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._store is not None
        return self._store

    def _deferred(self, name: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            with self._lock:
                if not self._done.is_set():
                    self._pending.append((name, tuple(_as_now(arg) for arg in args)))
                    return None
            return getattr(self.settle(), name)(*args)

        return call

    def __getattr__(self, name: str) -> Any:
        if name in DEFERRED:
            return self._deferred(name)
        return getattr(self.settle(), name)


def _as_now(value: Any) -> Any:
    """A record as it is now: the runner goes on changing the same object."""
    return value.model_copy(deep=True) if isinstance(value, Trajectory) else value
