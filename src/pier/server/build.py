"""The server's shared state, built once per server (`pier serve`'s lifespan,
and the CLI's commands that act as the server would)."""

from __future__ import annotations

import threading

from pier.executors import make_executor
from pier.executors.ports import LifecycleHooks, RunPorts
from pier.experiments.scheduler import ExperimentScheduler
from pier.lifecycle.start import Services
from pier.policies.webhooks import SenderConfig, WebhookSender
from pier.server.bus import RunBus
from pier.server.dispatcher import Dispatcher
from pier.server.experiments import experiments
from pier.server.pgbus import PgBus, is_postgres
from pier.server.state import ApiState
from pier.settings import Settings
from pier.vault import load_vault


def build_state(settings: Settings) -> ApiState:
    services = Services(settings)
    services.store  # noqa: B018 - open it now: migrations run before the first request
    # Runs may execute in other processes (workers, replicas) on a shared
    # PostgreSQL: their wake-ups then come through it.
    bus = PgBus(settings.db_url) if is_postgres(settings.db_url) else RunBus()
    vault = load_vault(settings)
    webhooks = WebhookSender(services.store, vault, SenderConfig.of(settings), settings.outbound)
    wake_experiments = threading.Event()  # a run ended: an experiment may start its next attempt now
    ended = lambda _trajectory_id: wake_experiments.set()  # noqa: E731
    hooks = LifecycleHooks(RunPorts(services, vault, bus.publish, webhooks, ended))
    dispatcher = Dispatcher(hooks, make_executor(hooks))
    scheduler = ExperimentScheduler(
        experiments(dispatcher, settings), settings.experiment_poll_sec, wake=wake_experiments
    )
    return ApiState(services, vault, bus, dispatcher, experiment_scheduler=scheduler)
