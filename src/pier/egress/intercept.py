"""HTTP/1.1 inside an intercepted CONNECT: the requests a sandbox sends to a host
that one of its run's secrets is meant for. h11 reads and writes both sides
(pier parses no HTTP itself); each request's headers get the secret values in
place of their placeholders, and each response's headers get the placeholders
back, then everything else is relayed as it came. A request naming another host
(its Host header) than the tunnel's is refused: the value goes to the host the
tunnel verified, and to no other site behind the same address."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h11

from pier.egress.ca import ALPN
from pier.egress.inject import LiveInjection, substitute_headers

log = logging.getLogger(__name__)

READ_CHUNK = 65536
MAX_HEAD = 65536


def upstream_context(ca_bundle: Path | None) -> ssl.SSLContext:
    """Verifies the real host as any client would (the system's CAs, and the
    operator's PIER_CA_BUNDLE too), HTTP/1.1 only."""
    context = ssl.create_default_context()
    if ca_bundle is not None:
        context.load_verify_locations(cafile=str(ca_bundle))
    context.set_alpn_protocols(ALPN)
    return context


async def relay_http(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    host: str,
    port: int,
    injections: tuple[LiveInjection, ...],
    on_injected: Callable[[], None],
) -> None:
    """Relay requests until either side ends, calling on_injected for each request
    that got a value put in (before it is sent). Raises h11.ProtocolError, OSError."""
    server = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    toward = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    while True:
        request = await _next_request(server, client[0], upstream[0])
        if not isinstance(request, h11.Request):
            return
        if not _same_host(request.headers, host, port):
            await _refuse(server, client[1], host)
            return
        headers, changed = substitute_headers(request.headers, injections)
        if changed:
            on_injected()
        upstream[1].write(toward.send(h11.Request(
            method=request.method, target=request.target, headers=headers,
            http_version=request.http_version)))  # fmt: skip
        await run_both(
            send_body(server, client[0], toward, upstream[1]),
            send_answer(toward, upstream[0], server, client[1], injections),
        )
        if server.our_state is h11.SWITCHED_PROTOCOL:  # 101: a WebSocket, say; bytes from here on
            await _switched(server, client, toward, upstream)
            return
        if not _reusable(server, toward):
            return
        server.start_next_cycle()
        toward.start_next_cycle()


async def _next_request(
    server: h11.Connection, reader: asyncio.StreamReader, upstream: asyncio.StreamReader
) -> object:
    """The client's next request, or None once the host has closed the idle
    connection: the client then sees the close, as it would without pier, and
    does not send its next request into a dead connection."""
    request = asyncio.ensure_future(next_event(server, reader))
    closed = asyncio.ensure_future(upstream.read(1))  # a host sends nothing unasked
    try:
        done, _ = await asyncio.wait([request, closed], return_when=asyncio.FIRST_COMPLETED)
    finally:
        closed.cancel()
    if request not in done:
        request.cancel()
        return None
    return request.result()


async def next_event(conn: h11.Connection, reader: asyncio.StreamReader) -> object:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(await reader.read(READ_CHUNK))


async def send_body(
    server: h11.Connection, reader: asyncio.StreamReader, toward: h11.Connection, writer: asyncio.StreamWriter
) -> None:
    """The request's body, client to upstream, through its end."""
    while True:
        event = await next_event(server, reader)
        if isinstance(event, h11.Data):
            writer.write(toward.send(h11.Data(data=event.data)))
            await writer.drain()
        elif isinstance(event, h11.EndOfMessage):
            writer.write(toward.send(h11.EndOfMessage(headers=event.headers)))
            await writer.drain()
            return
        else:  # the client went away mid-request
            raise ConnectionError("the client closed the connection during its request")


async def send_answer(
    toward: h11.Connection,
    reader: asyncio.StreamReader,
    server: h11.Connection,
    writer: asyncio.StreamWriter,
    injections: Iterable[LiveInjection],
) -> None:
    """The response, upstream to client, through its end (or a 101)."""
    back = [(i.value.encode(), i.placeholder.encode()) for i in injections]
    while True:
        event = await next_event(toward, reader)
        if isinstance(event, (h11.InformationalResponse, h11.Response)):
            headers = [(name, _replace(value, back)) for name, value in event.headers]
            kind = type(event)
            writer.write(
                server.send(kind(status_code=event.status_code, headers=headers, reason=event.reason))
            )
            await writer.drain()
            if event.status_code == 101:
                return
        elif isinstance(event, h11.Data):
            writer.write(server.send(h11.Data(data=event.data)))
            await writer.drain()
        elif isinstance(event, h11.EndOfMessage):
            writer.write(server.send(h11.EndOfMessage(headers=event.headers)))
            await writer.drain()
            return
        else:
            raise ConnectionError("the server closed the connection before its response ended")


async def run_both(first: Coroutine[Any, Any, None], second: Coroutine[Any, Any, None]) -> None:
    """Run both; the first error cancels the other and is raised."""
    tasks = [asyncio.ensure_future(first), asyncio.ensure_future(second)]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()


def _reusable(server: h11.Connection, toward: h11.Connection) -> bool:
    states = (server.our_state, server.their_state, toward.our_state, toward.their_state)
    return all(state is h11.DONE for state in states)


async def _switched(
    server: h11.Connection,
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    toward: h11.Connection,
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """After a protocol switch, copy bytes both ways (what each side sent past the
    101 first)."""
    if server.trailing_data[0]:
        upstream[1].write(server.trailing_data[0])
    if toward.trailing_data[0]:
        client[1].write(toward.trailing_data[0])
    await run_both(_copy(client[0], upstream[1]), _copy(upstream[0], client[1]))


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(READ_CHUNK):
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof():
        with contextlib.suppress(OSError):
            writer.write_eof()


def _same_host(headers: Iterable[tuple[bytes, bytes]], host: str, port: int) -> bool:
    """The request's Host names the tunnel's host (and its port, when it says one)."""
    value = next((v for n, v in headers if n.lower() == b"host"), b"").decode("ascii", "replace")
    try:
        parts = urlsplit("//" + value)
        asked_port = parts.port
    except ValueError:
        return False
    return (parts.hostname or "") == host.lower().strip("[]") and asked_port in (None, port)


async def _refuse(server: h11.Connection, writer: asyncio.StreamWriter, host: str) -> None:
    body = (
        f"pier egress: this connection is to {host}; a request for another host (its Host header) "
        "is refused here, as the run's secrets go to their own hosts only\n"
    ).encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]  # fmt: skip
    writer.write(server.send(h11.Response(status_code=421, headers=headers, reason=b"Misdirected Request")))
    writer.write(server.send(h11.Data(data=body)))
    writer.write(server.send(h11.EndOfMessage()))
    await writer.drain()


def _replace(value: bytes, pairs: list[tuple[bytes, bytes]]) -> bytes:
    for old, new in pairs:
        value = value.replace(old, new)
    return value
