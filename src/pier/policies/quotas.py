"""Quotas per collection: what one collection may hold of a shared server.

Each quota is a server default (PIER_QUOTA_*) the admin may override per
collection (stored; `PUT /api/v1/collections/<name>/quotas`). When one is
reached the request is refused with QuotaExceeded, which the API answers 429
with a Retry-After.

| quota | counted | refused |
| --- | --- | --- |
| concurrent_runs | runs of the collection executing at once | never: its next run waits, others go first; a new run (not a continuation) when the collection's kept sandboxes (docs/sessions.md) hold every slot |
| queued_runs | runs of the collection waiting for a slot | a new run (counted in the transaction that would store it) |
| streams_per_token | live log streams one token holds open | a new stream |
| upload_bytes | the collection's stored uploads | an upload that would pass it |
| output_bytes | the collection's stored run outputs | a new run |
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from pier.db import Store
from pier.errors import PierError
from pier.record import RunStatus
from pier.settings import Settings
from pier.storage.base import UPLOADS, RunStorage

CACHE_SEC = 5.0  # overrides and byte counts are read again this often
BYTES_CACHE_SEC = 30.0


@dataclass(frozen=True)
class Quotas:
    concurrent_runs: int | None  # None: any of the server's slots
    queued_runs: int
    streams_per_token: int
    upload_bytes: int
    output_bytes: int

    @classmethod
    def defaults(cls, settings: Settings) -> Quotas:
        return cls(
            settings.quota_concurrent_runs,
            settings.quota_queued_runs,
            settings.quota_streams_per_token,
            settings.quota_upload_bytes,
            settings.quota_output_bytes,
        )

    def overridden(self, overrides: dict[str, Any]) -> Quotas:
        known = {f.name for f in fields(self)}
        return replace(self, **{k: v for k, v in overrides.items() if k in known})

    def as_dict(self) -> dict[str, int | None]:
        return asdict(self)


class QuotaExceeded(PierError):
    """A collection reached one of its quotas: 429, try again after retry_after seconds."""

    def __init__(self, quota: str, message: str, retry_after: int):
        super().__init__(message)
        self.quota = quota
        self.retry_after = retry_after


class _Cache:
    """Values by key, read again after `ttl` seconds."""

    def __init__(self, ttl: float):
        self._ttl = ttl
        self._values: dict[str, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, load: Callable[[], Any]) -> Any:
        now = time.monotonic()
        with self._lock:
            found = self._values.get(key)
        if found is not None and now - found[0] < self._ttl:
            return found[1]
        value = load()
        with self._lock:
            self._values[key] = (now, value)
        return value

    def forget(self, key: str) -> None:
        with self._lock:
            self._values.pop(key, None)


class CollectionQuotas:
    """The quotas in force for each collection, and the checks against them."""

    def __init__(self, store: Store, storage: Callable[[], RunStorage], settings: Settings):
        self._store = store
        self._storage = storage  # opened when first needed
        self._settings = settings
        self._quotas = _Cache(CACHE_SEC)
        self._bytes = _Cache(BYTES_CACHE_SEC)

    def defaults(self) -> Quotas:
        return Quotas.defaults(self._settings)

    def of(self, collection: str) -> Quotas:
        return self._quotas.get(
            collection, lambda: self.defaults().overridden(self._store.quota_overrides(collection))
        )

    def set_overrides(self, collection: str, overrides: dict[str, Any]) -> Quotas:
        self._store.set_quota_overrides(collection, overrides)
        self._quotas.forget(collection)
        return self.of(collection)

    def concurrent_runs(self, collection: str) -> int | None:
        return self.of(collection).concurrent_runs

    def queued_runs(self, collection: str) -> int:
        """The most runs of `collection` that may wait for a slot: the store
        refuses one more (enqueue_run's max_pending) in the same transaction
        that would store it."""
        return self.of(collection).queued_runs

    def queue_full(self, collection: str, waiting: int) -> QuotaExceeded:
        quota = self.of(collection).queued_runs
        return QuotaExceeded(
            "queued_runs",
            f"collection {collection!r} has {waiting} runs waiting for a slot, its quota "
            f"(queued_runs {quota}): wait for some to start, or ask the admin to raise it",
            retry_after=10,
        )

    def check_new_run(self, collection: str, continuing: bool = False) -> None:
        """Before a run is accepted: room in the queue, and for its outputs. The
        queue's count here refuses early (before preflight, before uploads are
        stored); the binding one is enqueue_run's, with queued_runs(). A kept
        sandbox holds one of the collection's concurrent_runs while kept: a
        new run is refused when they hold all (a run that continues in one is not)."""
        quotas = self.of(collection)
        if quotas.concurrent_runs is not None and not continuing:
            from pier.lifecycle.sessions import kept_sandboxes

            kept = kept_sandboxes(self._store, collection, self._settings.keep_ttl_sec)
            if len(kept) >= quotas.concurrent_runs:
                soonest = min(r.outputs.sandbox.kept_until or 0 for r in kept)
                raise QuotaExceeded(
                    "concurrent_runs",
                    f"collection {collection!r} keeps {len(kept)} sandbox(es), as many as its quota "
                    f"(concurrent_runs {quotas.concurrent_runs}): continue in one (continue_from), or wait "
                    "for one to expire (PIER_KEEP_TTL_SEC)",
                    retry_after=max(int(soonest - time.time()) + 1, 1),
                )
        waiting = self._store.count_runs(collection, [RunStatus.pending])
        if waiting >= quotas.queued_runs:
            raise self.queue_full(collection, waiting)
        stored = self._bytes.get(f"outputs:{collection}", lambda: self._output_bytes(collection))
        if stored >= quotas.output_bytes:
            raise QuotaExceeded(
                "output_bytes",
                f"collection {collection!r} stores {stored} bytes of run outputs, its quota "
                f"(output_bytes {quotas.output_bytes}): delete old runs' outputs, or ask the admin to raise it",
                retry_after=3600,
            )

    def check_upload(self, collection: str, size: int) -> None:
        """Before an upload of `size` bytes is stored."""
        quota = self.of(collection).upload_bytes
        key = f"uploads:{collection}"
        stored = self._bytes.get(key, lambda: self._stored_bytes(f"{collection}/{UPLOADS}"))
        if stored + size > quota:
            raise QuotaExceeded(
                "upload_bytes",
                f"collection {collection!r} stores {stored} bytes of uploads and this one has {size}: "
                f"more than its quota (upload_bytes {quota}). Uploads no run needs are deleted "
                f"{self._settings.upload_ttl_sec:g}s after they were made; or ask the admin to raise it",
                retry_after=int(min(self._settings.upload_ttl_sec, 3600)),
            )

    def uploaded(self, collection: str) -> None:
        """An upload was stored: count afresh next time."""
        self._bytes.forget(f"uploads:{collection}")

    def _output_bytes(self, collection: str) -> int:
        uploads = f"{collection}/{UPLOADS}/"
        return sum(f.size for f in self._storage().files(collection) if not f.key.startswith(uploads))

    def _stored_bytes(self, prefix: str) -> int:
        return sum(found.size for found in self._storage().files(prefix))


class StreamSlots:
    """Live log streams open per token, at most a quota each."""

    def __init__(self) -> None:
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, token_key: str, quota: int) -> Callable[[], None]:
        """Count one stream of this token, or QuotaExceeded; returns its release
        (idempotent)."""
        with self._lock:
            if self._open.get(token_key, 0) >= quota:
                raise QuotaExceeded(
                    "streams_per_token",
                    f"this token has {quota} live log streams open, its quota (streams_per_token): "
                    "close one, or ask the admin to raise it",
                    retry_after=5,
                )
            self._open[token_key] = self._open.get(token_key, 0) + 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                left = self._open.get(token_key, 1) - 1
                if left > 0:
                    self._open[token_key] = left
                else:
                    self._open.pop(token_key, None)

        return release
