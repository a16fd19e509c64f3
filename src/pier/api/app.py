"""The FastAPI app: wiring only. Routes live in routes/, bodies in schemas/;
what routes and the web UI's pages both do is pier.server.services, the run
machinery pier.server.dispatcher, start-up recovery pier.server.recovery."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
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

Every route but the health checks (`/health`, `/health/live`, `/health/ready`)
and the docs needs `Authorization: Bearer <token>`:
a collection's token (`pier collection create NAME`) or the admin token
(`PIER_ADMIN_TOKEN`). Errors are JSON: `{"detail": "<what to do>"}`."""


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
        state.bus.start()
        executor = state.dispatcher.executor
        if executor.durable:  # the queue is Temporal's: the store says how many wait
            metrics.watch_queue(lambda: services.store.count_with_status([RunStatus.pending]), lambda: 0)
        else:
            metrics.watch_queue(lambda: len(executor.pending()), lambda: len(executor.running()))
        metrics.watch_readiness(lambda: health.ready_services(state))
        executor.start()
        # after the executor started (a submit needs it), and in the background:
        # whatever the previous servers left, this one starts and serves
        recovery = Recovery(state.dispatcher).start()
        app.state.recovery = recovery
        sweeper.start()
        scheduler.start()
        if state.dispatcher.webhooks is not None:
            state.dispatcher.webhooks.start()  # deliveries kept from before a restart go out too
        if state.experiment_scheduler is not None:
            state.experiment_scheduler.start()
        services.start_pool()  # PIER_WARM_POOL: ready sandboxes, filled in the background
        services.say_isolation_problem("pier serve")
        log.info("pier serve: %d run slot(s)", settings.max_concurrent_runs)
        say_runtime(lambda: services.backend, log.info)
        try:
            yield
        finally:
            metrics.watch_readiness(None)
            scheduler.stop()
            recovery.stop()
            if state.experiment_scheduler is not None:
                state.experiment_scheduler.stop()
            sweeper.stop()
            state.dispatcher.stop()
            if services.pool is not None:
                services.pool.close()
            if state.dispatcher.webhooks is not None:
                state.dispatcher.webhooks.close()
            state.bus.close()
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
