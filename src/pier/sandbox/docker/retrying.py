"""Engine calls that outlast a transient engine error: a Docker engine that
answers 500/502/503/504 once, drops or refuses the connection, or times out,
costs a run a pause instead of its end.

Only a call that may be made twice is tried again, with a growing wait, for up
to a budget (PIER_ENGINE_RETRY_SEC) after its first failure, each try noted in
the run's log (pier.sandbox.runlog); past the budget, or for any other error,
the engine's own error is raised as it came, so the run fails with the true
reason:

- reads (inspect, list, info, an archive's read: the call that opens it) and
  verbs the engine makes idempotent (start, remove);
- create, when the container has a name: a try whose answer was lost may have
  made it, and the next try then meets the name taken (409) and takes that
  container, if it carries the labels asked for (pier's carry the run and the
  second it was made), instead of a second one;
- copying bytes in (the same archive twice is the same files), or a tar kept
  in a file (read again from its start); a generator cannot be sent again, so
  it is tried once;
- making an exec (an exec never started costs nothing); starting one only
  when the engine says it has not started (a command never runs twice).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import docker
import docker.errors
import requests

from pier.sandbox.runlog import note

T = TypeVar("T")

TRANSIENT_STATUS = frozenset({500, 502, 503, 504})
FIRST_WAIT_SEC = 0.5
MAX_WAIT_SEC = 5.0
# Calls that may be made again as they are (reads, and verbs the engine makes idempotent).
REPEATABLE = frozenset({
    "info", "version", "inspect_container", "inspect_image", "inspect_network", "containers", "images",
    "networks", "exec_inspect", "exec_create", "start", "remove_container", "get_archive", "stats",
})  # fmt: skip


def transient(exc: BaseException) -> bool:
    """Whether `exc` says the engine failed for a moment (worth trying again)."""
    if isinstance(exc, docker.errors.APIError):
        return exc.status_code in TRANSIENT_STATUS
    return isinstance(exc, requests.ConnectionError | requests.Timeout | ConnectionError | TimeoutError)


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, docker.errors.APIError) and exc.explanation:
        return f"{exc.status_code} {str(exc.explanation).strip().splitlines()[0][:200]}"
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


class RetryingEngine:
    """A docker.APIClient whose repeatable calls are tried again (see the
    module); every other attribute is the client's own."""

    def __init__(self, api: docker.APIClient, budget_sec: float):
        self._api = api
        self._budget = budget_sec

    @property
    def plain(self) -> docker.APIClient:
        """The client itself, whose calls are tried once."""
        return self._api

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._api, name)
        if name not in REPEATABLE:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.retried(lambda: attr(*args, **kwargs), name)

        return call

    def retried(
        self, call: Callable[[], T], what: str, again: Callable[[BaseException], bool] | None = None
    ) -> T:
        """`call()`, tried again while it fails transiently (and `again(error)`
        allows it), until the budget after the first failure is spent."""
        deadline: float | None = None
        wait, tries = FIRST_WAIT_SEC, 0
        while True:
            try:
                result = call()
            except Exception as exc:
                tries += 1
                now = time.monotonic()
                deadline = deadline if deadline is not None else now + self._budget
                if not transient(exc):
                    raise
                if now >= deadline:
                    if tries > 1:
                        note(f"engine: {what} failed {tries} times over {self._budget:g}s; giving up: "
                             f"{_first_line(exc)}")  # fmt: skip
                    raise
                if again is not None and not again(exc):
                    raise
                pause = min(wait, deadline - now) * random.uniform(0.8, 1.0)
                note(f"engine: {what} failed ({_first_line(exc)}); trying again in {pause:.1f}s")
                time.sleep(pause)
                wait = min(wait * 2, MAX_WAIT_SEC)
                continue
            if tries:
                note(f"engine: {what} succeeded on try {tries + 1}")
            return result

    def create_container(self, *args: Any, **kwargs: Any) -> Any:
        name, labels = kwargs.get("name"), kwargs.get("labels") or {}
        if not name:  # a lost answer could not be told from no container: once
            return self._api.create_container(*args, **kwargs)
        failed: list[BaseException] = []

        def once() -> Any:
            try:
                return self._api.create_container(*args, **kwargs)
            except docker.errors.APIError as exc:
                if exc.status_code != 409 or not failed:
                    raise
                return self._made_by_a_lost_try(name, labels, exc)

        def again(exc: BaseException) -> bool:
            failed.append(exc)
            return True

        return self.retried(once, "create_container", again)

    def _made_by_a_lost_try(self, name: str, labels: dict[str, str], conflict: Exception) -> Any:
        """The container `name` that an earlier try made though its answer was
        lost; the 409 when it is not one this call asked for."""
        found = self._api.inspect_container(name)
        has = (found.get("Config") or {}).get("Labels") or {}  # the image's labels too
        if not labels or any(has.get(key) != value for key, value in labels.items()):
            raise conflict
        note(f"engine: container {name} was made by a try whose answer was lost: taking it")
        return {"Id": found["Id"], "Warnings": []}

    def put_archive(self, container: str, path: str, data: Any) -> Any:
        if not resendable(data):  # a stream is spent by the first try
            return self._api.put_archive(container, path, data)
        return self.retried(lambda: self._api.put_archive(container, path, data), "put_archive")

    def exec_start(self, exec_id: str, *args: Any, **kwargs: Any) -> Any:
        def never_started(_exc: BaseException) -> bool:
            try:
                state = self._api.exec_inspect(exec_id)
            except Exception:  # cannot tell: the command may run, so not again
                return False
            started = state.get("Running") or state.get("ExitCode") is not None or state.get("Pid")
            if started:
                note(f"engine: starting exec {exec_id[:12]} failed after the command started: not again")
            return not started

        return self.retried(
            lambda: self._api.exec_start(exec_id, *args, **kwargs), "exec_start", never_started
        )


def resendable(data: Any) -> bool:
    """Bytes, or an iterable that starts again at each iteration (a file's tar),
    not an iterator (a generator is spent by the first try)."""
    return isinstance(data, bytes) or (isinstance(data, Iterable) and not isinstance(data, Iterator))
