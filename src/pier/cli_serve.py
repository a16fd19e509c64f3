"""`pier serve`, `pier collection ...` and `pier task push`: the API server and
what it serves, managed from the shell on the server's own store."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from pier.cli_console import err, fail, out, refusals
from pier.cli_experiments import experiment_app
from pier.cli_routines import routine_app
from pier.errors import InputError, PierError

collection_app = typer.Typer(
    help="Collections: namespaces of tasks, runs, secrets and tokens.", no_args_is_help=True
)
task_app = typer.Typer(help="Tasks: named, stored workflows of a collection.", no_args_is_help=True)


def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8000,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    """Serve the run API (FastAPI under uvicorn); docs at /docs."""
    import uvicorn

    from pier import web
    from pier.api.app import create_app

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # One process: the executor's run slots and the live-log wake-ups are in memory.
    uvicorn.run(
        create_app(pages=web.install), host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5
    )


def worker(
    identity: Annotated[str | None, typer.Option(help="this worker's name; default host-pid")] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    """Run runs from Temporal on this host's Docker engine (PIER_EXECUTOR=temporal fleets)."""
    from pier.executors.temporal import TemporalUnavailable
    from pier.executors.temporal_worker import run_worker
    from pier.settings import get_settings

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = get_settings()
    if identity:
        settings = settings.model_copy(update={"worker_identity": identity})
    from pier.api.pgbus import PgNotifier, is_postgres

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


@collection_app.command("create")
def collection_create(name: Annotated[str, typer.Argument(help="the collection's name")]) -> None:
    """Create a collection (or reuse it) and print a new token for it, once."""
    from pier.api.tokens import issue_token
    from pier.lifecycle.service import Services
    from pier.names import check_collection_name

    try:
        check_collection_name(name)
    except InputError as exc:
        raise fail(str(exc)) from None
    store = Services().store
    store.create_collection(name)
    token = issue_token(store, name, "cli")
    err.print(f"collection {name}: here is its token; it is shown only this once", highlight=False)
    print(token)


@collection_app.command("list")
def collection_list() -> None:
    """Every collection."""
    from pier.lifecycle.service import Services

    for collection in Services().store.list_collections():
        print(collection.name)


@task_app.command("push")
def task_push(
    runbook: Annotated[Path, typer.Argument(help="a RUNBOOK.md, or a folder holding one")],
    collection: Annotated[str, typer.Option(help="the collection to store it in")],
    name: Annotated[str | None, typer.Option(help="the task's name; default the runbook's folder")] = None,
) -> None:
    """Store a runbook as a task (created or replaced), checked first."""
    from pier.lifecycle.plan import checked_task
    from pier.lifecycle.service import Services
    from pier.names import check_task_name
    from pier.runbook import load
    from pier.tasks import task_from_runbook

    services = Services()
    with refusals():
        loaded = load(runbook)
        task = checked_task(task_from_runbook(loaded, services.settings.default_snapshot))
        label = check_task_name(name or Path(loaded.path or runbook).resolve().parent.name)
        services.store.get_collection(collection)
        services.store.put_task(collection, label, task.model_dump(mode="json"))
    out.print(f"task {collection}/{label} stored", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("worker")(worker)
    app.add_typer(collection_app, name="collection")
    app.add_typer(task_app, name="task")
    app.add_typer(routine_app, name="routine")
    app.add_typer(experiment_app, name="experiment")
