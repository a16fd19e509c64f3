"""The HTTP server `pier serve` runs the app under: uvicorn, with pier's
bounds before authentication (`pier.serving`) set from the settings."""

from __future__ import annotations

import socket

import uvicorn
from fastapi import FastAPI

from pier.serving import BoundedProtocol, bounded_protocol
from pier.settings import Settings


def protocol_for(settings: Settings) -> type[BoundedProtocol]:
    return bounded_protocol(
        header_timeout_sec=settings.http_header_timeout_sec,
        body_idle_sec=settings.http_body_idle_sec,
        max_head_bytes=settings.http_max_head_bytes,
        max_line_bytes=settings.http_max_line_bytes,
        max_connections_per_address=settings.http_max_connections_per_address,
    )


def serve(
    app: FastAPI,
    settings: Settings,
    *,
    host: str,
    port: int,
    log_level: str,
    sockets: list[socket.socket] | None = None,
) -> None:
    """Serve app; on `sockets` when given (already bound and listening: a port in
    use was refused before any start-up work)."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol_for(settings),
        timeout_keep_alive=settings.http_keepalive_sec,
        timeout_graceful_shutdown=5,
    )
    uvicorn.Server(config).run(sockets=sockets)
