"""`pier worker`: runs from Temporal on this host's engine (a fleet's worker)."""

from __future__ import annotations

from typing import Annotated

import typer

from pier.cli.console import fail
from pier.errors import PierError


def worker(
    identity: Annotated[str | None, typer.Option(help="this worker's name; default host-pid")] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    """Run runs from Temporal on this host's Docker engine (PIER_EXECUTOR=temporal fleets)."""
    from pier.executors.temporal import TemporalUnavailable
    from pier.executors.temporal.worker import run_worker
    from pier.settings import get_settings
    from pier.telemetry import logs

    logs.configure(log_level)
    settings = get_settings()
    logs.configure(log_level, settings.log_format)  # as .env may say too
    if identity:
        settings = settings.model_copy(update={"worker_identity": identity})
    from pier.lifecycle.start import Services
    from pier.server.pgbus import PgNotifier, is_postgres

    Services(settings).say_isolation_problem("pier worker")

    # live logs reach followers on any `pier serve` through PostgreSQL; on
    # SQLite (one host) the followers' poll of the store finds them
    notifier = PgNotifier(settings.db_url) if is_postgres(settings.db_url) else None
    try:
        run_worker(settings, publish=notifier.publish if notifier else lambda _tid: None)
    except (TemporalUnavailable, PierError) as exc:
        raise fail(str(exc), code=1) from None
    finally:
        if notifier is not None:
            notifier.close()
