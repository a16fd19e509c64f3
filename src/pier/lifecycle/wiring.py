"""What a pier process holds: its settings, and the database, the run storage and
the sandbox backend, each opened on first use. Its own module, importing only the
settings at first, so that a command that only reads (`pier runs`, `pier logs`)
opens the database without loading the lifecycle, the gateway or the docker SDK."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, cast

from pier.errors import PierError
from pier.settings import Settings, get_settings, make_private_dir

if TYPE_CHECKING:
    from pier.db import Store
    from pier.lifecycle.pool import WarmPool
    from pier.sandbox.base import SandboxBackend
    from pier.storage import RunStorage

log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings = field(default_factory=get_settings)
    pool: WarmPool | None = None  # set and started by a long-lived process (pier serve)

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
        from pier.db import Store
        from pier.db.audit import HEAD_FILE

        make_private_dir(self.settings.home)
        store = Store.open(self.settings.db_url)
        store.anchor_audit(
            self.settings.home / HEAD_FILE
        )  # the newest entry kept out of the database's reach
        return store

    @cached_property
    def run_store(self) -> Store:
        """The store as a run writes to it: calls ride out a database that does
        not answer for up to PIER_DB_RETRY_SEC (pier.db.retry)."""
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
