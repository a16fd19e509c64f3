"""The HTTP server `pier serve` runs the app under: uvicorn, with pier's
bounds before authentication (`pier.serving`) set from the settings."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable
from types import FrameType

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


class DrainingServer(uvicorn.Server):
    """uvicorn, but the first SIGTERM (or SIGINT) drains before it stops:
    `drain(signal name)` runs on a thread while the server still answers (new
    runs 503, readiness false, runs in flight going on), and the server stops
    when it returns. A second signal stops it at once."""

    def __init__(self, config: uvicorn.Config, drain: Callable[[str], None] | None = None):
        super().__init__(config)
        self._drain = drain
        self._draining: threading.Thread | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._drain is None or self._draining is not None or self.should_exit:
            super().handle_exit(sig, frame)
            return
        self._captured_signals.append(sig)
        drain = self._drain

        def drain_then_exit() -> None:
            try:
                drain(signal.Signals(sig).name)
            finally:
                self.should_exit = True

        self._draining = threading.Thread(target=drain_then_exit, name="pier-drain", daemon=True)
        self._draining.start()


def serve(
    app: FastAPI,
    settings: Settings,
    *,
    host: str,
    port: int,
    log_level: str,
    sockets: list[socket.socket] | None = None,
    drain: Callable[[str], None] | None = None,
) -> None:
    """Serve app; on `sockets` when given (already bound and listening: a port in
    use was refused before any start-up work); `drain` is called on the first
    SIGTERM, before the server stops (DrainingServer)."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol_for(settings),
        timeout_keep_alive=settings.http_keepalive_sec,
        timeout_graceful_shutdown=5,
        # JSON logs: uvicorn's access and error lines go to pier's handler (pier.telemetry.logs)
        log_config=None if settings.log_format == "json" else uvicorn.config.LOGGING_CONFIG,
    )
    DrainingServer(config, drain).run(sockets=sockets)
