"""What the routes and pages share, built once per server (pier.server.build)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pier.db import Store
from pier.lifecycle.start import Services
from pier.policies.quotas import CollectionQuotas, StreamSlots
from pier.server.bus import RunBus
from pier.server.dispatcher import Dispatcher
from pier.server.tokens import KnownTokens
from pier.settings import Settings
from pier.storage.base import RunStorage
from pier.vault import Vault

if TYPE_CHECKING:
    from pier.experiments.scheduler import ExperimentScheduler
    from pier.experiments.service import Experiments


@dataclass
class ApiState:
    services: Services
    vault: Vault
    bus: RunBus
    dispatcher: Dispatcher
    tokens: KnownTokens = field(default_factory=KnownTokens)
    streams: StreamSlots = field(default_factory=StreamSlots)  # live log streams open per token
    # Experiments: the service the routes use and the poller that schedules their runs.
    experiment_scheduler: ExperimentScheduler | None = None

    @property
    def experiments(self) -> Experiments:
        assert self.experiment_scheduler is not None, "build_state makes it"
        return self.experiment_scheduler.experiments

    def wake_experiments(self) -> None:
        if self.experiment_scheduler is not None:
            self.experiment_scheduler.wake()

    @property
    def settings(self) -> Settings:
        return self.services.settings

    @property
    def store(self) -> Store:
        return self.services.store

    @property
    def quotas(self) -> CollectionQuotas:
        return self.dispatcher.hooks.quotas

    @property
    def storage(self) -> RunStorage:
        return self.services.storage
