"""The HTTP server `pier serve` runs the app under: uvicorn, with the timeouts
it lacks on its own.

uvicorn closes a connection idle between requests (PIER_HTTP_KEEPALIVE_SEC),
but waits for ever for a request's head or the rest of its body: a client
that opens connections and sends a byte now and then (slow loris) holds them
all. Here a request's line and headers must arrive within
PIER_HTTP_HEADER_TIMEOUT_SEC of its first byte (or of the connection), and a
body may not pause longer than PIER_HTTP_BODY_IDLE_SEC between two pieces;
either way the connection is answered 408 and closed.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Callable
from types import FrameType

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from pier.settings import Settings

TIMEOUT_ANSWER = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


class TimedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a deadline while a request arrives."""

    header_timeout_sec = 10.0
    body_idle_sec = 30.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout_sec)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(self.header_timeout_sec)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(self.body_idle_sec)  # disarmed at once when there is no body

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._arm(self.body_idle_sec)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(TIMEOUT_ANSWER)
        self.transport.close()


def protocol_for(settings: Settings) -> type[TimedProtocol]:
    return type(
        "PierHttpProtocol",
        (TimedProtocol,),
        {
            "header_timeout_sec": settings.http_header_timeout_sec,
            "body_idle_sec": settings.http_body_idle_sec,
        },
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
