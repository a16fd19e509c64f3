"""`pier serve`, `pier collection ...` and `pier task push`: the API server and
what it serves, managed from the shell on the server's own store."""

from __future__ import annotations

import errno
import logging
import socket
from pathlib import Path
from typing import Annotated

import typer

from pier.cli.console import err, fail, out, refusals, show_list
from pier.cli.experiment import experiment_app
from pier.cli.routine import routine_app
from pier.errors import InputError, PierError

collection_app = typer.Typer(
    help="Collections: namespaces of tasks, runs, secrets and tokens.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
task_app = typer.Typer(
    help="Tasks: named, stored workflows of a collection.", no_args_is_help=True, rich_markup_mode=None
)


def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8000,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    """Serve the run API (FastAPI under uvicorn); docs at /docs."""
    from pier import web
    from pier.api.app import create_app
    from pier.api.http_server import serve as serve_http
    from pier.settings import get_settings

    # The address first: a port in use is refused before any start-up work
    # (sweep, re-queue) is done, and the socket is handed to uvicorn, so nothing
    # can take the port in between.
    listener = listen(host, port)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = get_settings()
    # One process: the executor's run slots and the live-log wake-ups are in memory.
    serve_http(
        create_app(settings, pages=web.install), settings, host=host, port=port, log_level=log_level,
        sockets=[listener],
    )  # fmt: skip


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on host:port; exit 1 saying what to do when it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise fail(
                f"port {port} on {host} is already in use (another `pier serve`?): choose another with "
                f"--port, e.g. `pier serve --port {port + 1}`, or stop what listens there",
                code=1,
            ) from None
        raise fail(
            f"cannot listen on {host}:{port} ({exc.strerror}): check --host and --port", code=1
        ) from None
    sock.set_inheritable(True)
    return sock


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
    from pier.lifecycle.service import Services

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


@collection_app.command("create")
def collection_create(name: Annotated[str, typer.Argument(help="the collection's name")]) -> None:
    """Create a collection (or reuse it) and print a new token for it, once."""
    from pier.api.tokens import issue_token
    from pier.lifecycle.services import Services
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
def collection_list(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Every collection."""
    from pier.lifecycle.services import Services

    found = Services().store.list_collections()
    show_list(("collection",), [[c.name] for c in found], as_json, found)


@task_app.command("list")
def task_list(
    collection: Annotated[str, typer.Option(help="the collection whose tasks to list")],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """A collection's stored tasks, with their agent and model."""
    from pier.lifecycle.service import Services

    services = Services()
    with refusals():
        services.store.get_collection(collection)
        found = services.store.list_tasks(collection)
    rows = [[t.name, *_agent_and_model(t.definition), t.description or ""] for t in found]
    show_list(("task", "agent", "model", "description"), rows, as_json, found, empty="no tasks")


def _agent_and_model(definition: dict) -> list[str]:
    params = definition.get("init_params") or {}
    return [str(params.get("agent") or ""), str(params.get("model") or "")]


@task_app.command("push")
def task_push(
    runbook: Annotated[Path, typer.Argument(help="a RUNBOOK.md, or a folder holding one")],
    collection: Annotated[str, typer.Option(help="the collection to store it in")],
    name: Annotated[str | None, typer.Option(help="the task's name; default the runbook's folder")] = None,
) -> None:
    """Store a runbook as a task (created or replaced), checked first."""
    from pier.lifecycle.plan import checked_task
    from pier.lifecycle.services import Services
    from pier.names import check_task_name
    from pier.runbook import load
    from pier.tasks import task_from_runbook

    services = Services()
    with refusals():
        loaded = load(runbook)
        task = checked_task(task_from_runbook(loaded, services.settings.default_snapshot), services.settings)
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
