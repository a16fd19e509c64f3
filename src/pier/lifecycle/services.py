"""What a pier process holds: its settings, and the database, the run storage and
the sandbox backend, each opened on first use. Its own module, importing only the
settings at first, so that a command that only reads (`pier runs`, `pier logs`)
opens the database without loading the lifecycle, the gateway or the docker SDK."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from pier.errors import PierError
from pier.settings import Settings, get_settings

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

        if self.settings.warm_pool and self.pool is None:
            try:
                self.pool = WarmPool(self.backend, self.settings).start()
            except PierError as exc:  # no engine yet: runs create their sandboxes
                log.warning("warm pool not started: %s", exc)
        return self.pool

    @cached_property
    def store(self) -> Store:
        from pier.db import Store

        self.settings.home.mkdir(parents=True, exist_ok=True)
        return Store.open(self.settings.db_url)

    @cached_property
    def storage(self) -> RunStorage:
        from pier.storage import open_storage

        return open_storage(self.settings.storage_location)

    @cached_property
    def backend(self) -> SandboxBackend:
        from pier.sandbox import get_backend

        backend = get_backend(self.settings)
        backend.ping()
        return backend
