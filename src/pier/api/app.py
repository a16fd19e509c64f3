"""The FastAPI app: wiring only. Routes live in routes/, bodies in schemas/;
what routes and the web UI's pages both do is pier.server.services, the run
machinery pier.server.dispatcher, start-up recovery pier.server.recovery."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib.metadata import version

from fastapi import FastAPI

from pier.api import docs as api_docs
from pier.api import errors
from pier.api.limits import Gate, NoTrailingSlash
from pier.api.observe import Observe
from pier.api.routes import (
    catalog,
    catalogue,
    chat,
    collections,
    events,
    files,
    health,
    operations,
    routines,
    runs,
    tasks,
    trajectories,
    volumes,
)
from pier.api.routes import experiments as experiment_routes
from pier.lifecycle.background import PeriodicSweeper
from pier.record import RunStatus
from pier.routines.scheduler import Scheduler
from pier.sandbox.base import say_runtime
from pier.server.build import build_state
from pier.server.recovery import Recovery
from pier.server.routines import fire
from pier.settings import Settings, get_settings
from pier.telemetry import metrics, tracing

log = logging.getLogger(__name__)

DESCRIPTION = """Runs AI agents on runbooks, one isolated sandbox per run.

Every route but the health checks (`/health`, `/health/live`, `/health/ready`),
the step templates and the docs needs `Authorization: Bearer <token>`:
a collection's token (`pier collection create NAME`) or the admin token
(`PIER_ADMIN_TOKEN`). Errors are JSON: `{"detail": "<what to do>"}`."""


@dataclass(frozen=True)
class Background:
    """One of the services pier serve runs beside its routes. The lifespan starts
    them in its list's order and stops them in the reverse order, so each starts
    after, and stops before, what it uses (the executor before what submits runs;
    the executor's drain before the webhooks that report the ends)."""

    name: str
    start: Callable[[], object]
    stop: Callable[[], object]


def create_app(
    settings: Settings | None = None, *, pages: Callable[[FastAPI], None] | None = None
) -> FastAPI:
    """The API; `pages` adds a user interface after the API's error handlers
    (pier serve passes the web UI's installer: pier.web sits beside the API and
    uses it, so the API does not import it back)."""
    settings = settings or get_settings()
    observe(settings, "pier-serve")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = build_state(settings)
        app.state.pier = state
        services = state.services
        services.storage.check()  # a bucket that is not there stops the start, saying so
        log.info("pier serve: outputs and uploads in %s", services.storage.url)
        sweeper = PeriodicSweeper(lambda: services.backend, services.store, settings, services.storage)
        scheduler = Scheduler(
            services.store, lambda r: fire(state.dispatcher, r, state.vault), settings.routine_poll_sec
        )
        executor = state.dispatcher.executor
        if executor.durable:  # the queue is Temporal's: the store says how many wait
            metrics.watch_queue(lambda: services.store.count_with_status([RunStatus.pending]), lambda: 0)
        else:
            metrics.watch_queue(lambda: len(executor.pending()), lambda: len(executor.running()))
        metrics.watch_readiness(lambda: health.ready_services(state))

        def start_recovery() -> None:
            # after the executor started (a submit needs it), and in the background:
            # whatever the previous servers left, this one starts and serves
            app.state.recovery = Recovery(state.dispatcher).start()

        def close_pool() -> None:
            if services.pool is not None:
                services.pool.close()

        webhooks, experiments = state.dispatcher.webhooks, state.experiment_scheduler
        background = [
            Background("bus", state.bus.start, state.bus.close),
            # deliveries kept from before a restart go out too
            Background("webhooks", webhooks.start, webhooks.close) if webhooks is not None else None,
            # PIER_WARM_POOL: ready sandboxes, filled in the background
            Background("warm pool", services.start_pool, close_pool),
            Background("executor", executor.start, state.dispatcher.stop),
            Background("sweeper", sweeper.start, sweeper.stop),
            Background("recovery", start_recovery, lambda: app.state.recovery.stop()),
            Background("experiments", experiments.start, experiments.stop)
            if experiments is not None
            else None,
            Background("routines", scheduler.start, scheduler.stop),
        ]
        started = [service for service in background if service is not None]
        for service in started:
            service.start()
            log.debug("pier serve: %s started", service.name)
        services.say_isolation_problem("pier serve")
        log.info("pier serve: %d run slot(s)", settings.max_concurrent_runs)
        say_runtime(lambda: services.backend, log.info)
        try:
            yield
        finally:
            metrics.watch_readiness(None)
            for service in reversed(started):
                service.stop()
            tracing.shutdown()

    app = FastAPI(
        title="pier",
        version=version("pier"),
        description=DESCRIPTION,
        lifespan=lifespan,
        redirect_slashes=False,
        docs_url=None,  # served from the package's own files (pier.api.docs), never a CDN
        redoc_url=None,
    )
    api_docs.install(app)
    errors.install(app)
    app.add_middleware(
        Gate,
        upload_limit=settings.max_upload_bytes,
        json_limit=settings.max_json_bytes,
        json_depth=settings.max_json_depth,
    )
    app.add_middleware(Observe)  # outside the limits: refused requests are counted (and audited) too
    app.add_middleware(NoTrailingSlash)
    for module in (health, collections, tasks, runs, trajectories, files, events, catalog, catalogue,
                   chat, routines, experiment_routes, volumes):  # fmt: skip
        app.include_router(module.router)
    app.include_router(operations.router)
    if pages is not None:
        pages(app)
    return app


_listening: set[str] = set()


def observe(settings: Settings, service: str) -> None:
    """Metrics labels, the metrics listener and tracing, as the settings say
    (once per process: a test may build several apps)."""
    metrics.allow_collection_labels(settings.metrics_collections)
    tracing.configure(service)
    address = settings.metrics_address
    if address and address not in _listening:
        metrics.serve(address)
        _listening.add(address)
        log.info("%s: metrics on http://%s/metrics", service, address)
