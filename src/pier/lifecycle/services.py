"""What a pier process holds: its settings, and the database, the run storage and
the sandbox backend, each opened on first use. Its own module, importing only the
settings at first, so that a command that only reads (`pier runs`, `pier logs`)
opens the database without loading the lifecycle, the gateway or the docker SDK."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, cast

from pier.errors import PierError
from pier.settings import Settings, get_settings, make_private_dir

if TYPE_CHECKING:
    from pier.db import Store
    from pier.lifecycle.opening import OpeningStore
    from pier.lifecycle.pool import WarmPool
    from pier.sandbox.base import SandboxBackend
    from pier.storage import RunStorage

log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings = field(default_factory=get_settings)
    pool: WarmPool | None = None  # set and started by a long-lived process (pier serve)
    _opening: OpeningStore | None = field(default=None, init=False, repr=False, compare=False)

    def open_store_early(self, then: Callable[[], object] | None = None) -> None:
        """Open the database in a thread from now on, then call `then` there (pier
        run ends abandoned runs): the run's writes wait for it in order
        (pier.lifecycle.opening) while its sandbox is created. `settle_store`
        waits for all of it."""
        from pier.lifecycle.opening import OpeningStore

        def open_run_store() -> Store:
            from pier.db.retry import RetryingStore

            store = self._open_store()
            self.__dict__["store"] = store  # what `store` answers from now on
            if then is not None:
                then()
            return cast("Store", RetryingStore(store, self.settings.db_retry_sec))

        if self._opening is None and "store" not in self.__dict__:
            self._opening = OpeningStore(open_run_store)

    def settle_store(self) -> None:
        """Wait for a database opened early and for every write made meanwhile;
        raises what failed. Nothing to wait for otherwise."""
        if self._opening is not None:
            self._opening.settle()

    def start_pool(self) -> WarmPool | None:
        """Start the warm pool PIER_WARM_POOL asks for (none when it is empty)."""
        from pier.lifecycle.pool import WarmPool
        from pier.telemetry import metrics

        if self.settings.warm_pool and self.pool is None:
            try:
                self.pool = WarmPool(self.backend, self.settings).start()
                metrics.pool_size.set_function(self.pool.idle_count)
            except PierError as exc:  # no engine yet: runs create their sandboxes
                log.warning("warm pool not started: %s", exc)
        return self.pool

    def say_isolation_problem(self, who: str) -> str | None:
        """Log, once at a long-lived process's start, why its sandboxes could reach
        this machine's services (no firewall binary, no right), if they could.
        Asks no engine: start-up never waits on one."""
        from pier.sandbox import get_backend

        try:
            problem = get_backend(self.settings).isolation_problem()
        except PierError as exc:
            problem = str(exc)
        if problem:
            log.warning("%s: %s", who, problem)
        return problem

    @cached_property
    def store(self) -> Store:
        if self._opening is not None:  # being opened in a thread: wait for it
            return cast("Store", self._opening.settle().plain)  # type: ignore[attr-defined]
        return self._open_store()

    def _open_store(self) -> Store:
        from pier.db import Store

        make_private_dir(self.settings.home)
        return Store.open(self.settings.db_url)

    @cached_property
    def run_store(self) -> Store:
        """The store as a run writes to it: calls ride out a database that does
        not answer for up to PIER_DB_RETRY_SEC (pier.db.retry)."""
        if self._opening is not None:  # its writes wait in order while it opens
            return cast("Store", self._opening)
        from pier.db.retry import RetryingStore

        return cast("Store", RetryingStore(self.store, self.settings.db_retry_sec))

    @cached_property
    def storage(self) -> RunStorage:
        from pier.storage import open_storage

        make_private_dir(self.settings.home)
        if self.settings.storage_url is None:  # a local folder, pier's own
            make_private_dir(self.settings.storage_root)
        return open_storage(self.settings.storage_location)

    @cached_property
    def backend(self) -> SandboxBackend:
        from pier.sandbox import get_backend

        backend = get_backend(self.settings)
        backend.ping()
        return backend
