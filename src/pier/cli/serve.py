"""`pier serve`: the HTTP API and the web UI, in one process."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pier.cli.console import fail

if TYPE_CHECKING:
    import socket

    from pier.settings import Settings


def serve(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="port to listen on")] = 8000,
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    """Serve the run API (FastAPI under uvicorn); docs at /docs."""
    from pier import web
    from pier.api.app import create_app
    from pier.api.http_server import serve as serve_http
    from pier.settings import get_settings
    from pier.telemetry import logs

    # The address first: a port in use is refused before any start-up work
    # (sweep, re-queue) is done, and the socket is handed to uvicorn, so nothing
    # can take the port in between.
    listener = listen(host, port)
    logs.configure(log_level)
    settings = get_settings()
    logs.configure(log_level, settings.log_format)  # as .env may say too
    from pier.db.engine import refuse_newer_url

    refuse_newer_url(settings.db_url)  # a newer pier's database: one line, before uvicorn starts
    _one_server_per_sqlite_home(settings)
    app = create_app(settings, pages=web.install)

    def drain(signal_name: str) -> None:  # SIGTERM: new runs refused, those in flight end first
        state = getattr(app.state, "pier", None)
        if state is not None:
            state.dispatcher.drain(settings.drain_timeout_sec, signal_name)

    # One process: the executor's run slots and the live-log wake-ups are in memory.
    serve_http(
        app, settings, host=host, port=port, log_level=log_level, sockets=[listener], drain=drain,
    )  # fmt: skip


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on host:port; exit 1 saying what to do when it cannot be."""
    import errno
    import socket

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


_held_lock = None  # this server's claim on its SQLite store, kept open for its life


def _one_server_per_sqlite_home(settings: Settings) -> None:
    """Warn when another `pier serve` already serves this SQLite store: each
    would run its own in-process runs and take the other's for orphans when it
    restarts (replicas need PostgreSQL: docs/fleet.md)."""
    global _held_lock
    import fcntl
    import logging
    import os

    from pier.db.engine import is_postgres

    if is_postgres(settings.db_url):
        return
    database = settings.db_url.removeprefix("sqlite:///")
    path = f"{database}.serve.lock"
    try:
        handle = open(path, "a+")  # noqa: SIM115 - held open while the server lives
    except OSError:
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        other = handle.read().strip() or "?"
        handle.close()
        logging.getLogger("pier.serve").warning(
            "another pier serve (pid %s) already serves the SQLite store %s: two servers on one SQLite home "
            "each run their own runs and end the other's as orphans when they restart; stop one, or give "
            "each its own PIER_HOME (replicas of one server need PostgreSQL: docs/fleet.md)",
            other, database,
        )  # fmt: skip
        return
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    _held_lock = handle
