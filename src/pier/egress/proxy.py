"""pier's egress proxy: the only way out of a sandbox on the egress network. It
speaks HTTP CONNECT for HTTPS and forwards plain HTTP requests sent to it as a
proxy (`GET http://host/path`, pier.egress.forward); h11 reads both, pier parses
no HTTP itself. It lets a run reach the names its allow-list holds and refuses
the rest with a message naming the host ("pier's egress allow-list refused
<host>: add it to network.allow"), counting each host refused for the run's log,
and never looks inside a tunnel (no TLS interception).

A run is known by its proxy credentials (a per-run token in the proxy URL that
the sandbox's HTTPS_PROXY carries). The proxy resolves names itself (the sandbox
has no DNS that reaches out), refuses IP literals and other ports unless listed,
and connects only to an address the outbound policy (pier.outbound) allows: a
listed name that resolves to a loopback, link-local, private or own address is
refused unless the operator permits it (PIER_OUTBOUND_ALLOW), however the
allow-list names it. The name is resolved once and the checked address is the
one connected to.

The one exception to "never looks inside": a CONNECT to a host that one of the
run's secrets is meant for (`inject: header`) is answered with TLS from the
run's own CA (pier.egress.ca), and its requests are relayed by
pier.egress.intercept, which puts the secret's value in their headers. Every
other host stays a plain tunnel."""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import contextlib
import datetime
import logging
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import h11

from pier.egress.allow import AllowList
from pier.egress.ca import RunCA
from pier.egress.forward import HTTP_PORT, Destination, NotForwarded, destination, outgoing_headers, shown
from pier.egress.inject import LiveInjection
from pier.egress.intercept import (
    MAX_HEAD,
    next_event,
    relay_http,
    run_both,
    send_answer,
    send_body,
    upstream_context,
)
from pier.errors import SandboxError
from pier.outbound import OutboundPolicy, OutboundRefused
from pier.telemetry import metrics

log = logging.getLogger(__name__)

TOKEN_PREFIX = "pier-egress-"
READ_CHUNK = 65536
MAX_REQUEST_HEAD = 16384
CONNECT_TIMEOUT_S = 30
START_TIMEOUT_S = 30
HALF_CLOSE_GRACE_S = 60
IDLE_S = 120  # a plain-HTTP client's keep-alive connection, between requests
HTTPS_PORT = 443


@dataclass
class EgressGrant:
    trajectory_id: str
    allow: AllowList
    expires_at: float  # monotonic
    token: str = field(default_factory=lambda: TOKEN_PREFIX + secrets.token_urlsafe(24))
    refused: collections.Counter[str] = field(default_factory=collections.Counter)  # host -> times
    injections: tuple[LiveInjection, ...] = ()  # secrets the proxy puts in, for their hosts only
    ca: RunCA | None = None  # signs what the proxy shows the sandbox for those hosts
    upstream_ca: Path | None = None  # extra CAs that verify those hosts (PIER_CA_BUNDLE)
    injected: int = 0  # requests that got a secret value
    policy: OutboundPolicy = field(default_factory=OutboundPolicy)  # which addresses upstreams may have

    def count_injected(self) -> None:
        self.injected += 1

    def injections_for(self, host: str, port: int) -> tuple[LiveInjection, ...]:
        host = host.lower().rstrip(".")
        return tuple(i for i in self.injections if i.applies_to(host, port))

    @property
    def live(self) -> bool:
        return time.monotonic() < self.expires_at


class EgressProxy:
    """One listening proxy; runs come and go as grants."""

    def __init__(self, host: str, port: int = 0):
        self.host = host
        self._sock = socket.create_server((host, port), reuse_port=False)
        self._sock.setblocking(False)
        self.port: int = self._sock.getsockname()[1]
        self._grants: dict[str, EgressGrant] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._started = threading.Event()

    def start(self) -> EgressProxy:
        threading.Thread(target=self._run, name="pier-egress", daemon=True).start()
        if not self._started.wait(START_TIMEOUT_S):
            raise SandboxError(f"the egress proxy did not start on {self.host}:{self.port}")
        return self

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, sock=self._sock))
        self._started.set()
        self._loop.run_forever()

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
            self._loop.call_soon_threadsafe(self._loop.stop)

    def open(
        self,
        trajectory_id: str,
        allow: AllowList,
        ttl_s: float,
        injections: tuple[LiveInjection, ...] = (),
        upstream_ca: Path | None = None,
        policy: OutboundPolicy | None = None,
    ) -> EgressGrant:
        """A run's grant. With injections, the run gets its own CA too, limited to
        their hosts and expiring with the grant."""
        grant = EgressGrant(trajectory_id, allow, time.monotonic() + ttl_s, injections=injections,
                            upstream_ca=upstream_ca, policy=policy or OutboundPolicy())  # fmt: skip
        if injections:
            hosts = [rule.pattern for i in injections for rule in i.hosts.rules]
            grant.ca = RunCA(trajectory_id, dict.fromkeys(hosts), datetime.timedelta(seconds=ttl_s))
        with self._lock:
            self._grants[grant.token] = grant
        return grant

    def close(self, grant: EgressGrant) -> None:
        with self._lock:
            self._grants.pop(grant.token, None)

    def proxy_url(self, grant: EgressGrant) -> str:
        return f"http://pier:{grant.token}@{self.host}:{self.port}"

    def _find(self, token: str | None) -> EgressGrant | None:
        with self._lock:
            grant = self._grants.get(token or "")
        return grant if grant is not None and grant.live else None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEAD)
        try:
            request = await _read_request(conn, reader)
            if request is not None:
                await self._serve(conn, request, reader, writer)
        except (h11.ProtocolError, ConnectionError, asyncio.IncompleteReadError) as exc:
            log.debug("egress: dropped a connection: %s", exc)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _serve(
        self,
        conn: h11.Connection,
        request: h11.Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        grant = self._find(_proxy_token(request.headers))
        if grant is None:
            await _refuse(conn, writer, 407, "pier egress: no live pier run holds these proxy credentials")
            return
        if request.method != b"CONNECT":
            await self._forward(grant, conn, request, (reader, writer))
            return
        target = request.target.decode("ascii", "replace")
        host, port = _split_target(target)
        address = await _judge(grant, conn, writer, host, port, HTTPS_PORT)
        if address is None:
            return
        injections = grant.injections_for(host, port)
        if injections:
            await self._intercept(grant, conn, (reader, writer), (host, port, address), injections)
            return
        try:
            upstream_reader, upstream_writer = await asyncio.wait_for(
                asyncio.open_connection(address, port), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            await _refuse(conn, writer, 502, f"pier egress: {target} did not answer ({exc})")
            return
        writer.write(conn.send(h11.Response(status_code=200, headers=[], reason=b"Connection established")))
        await writer.drain()
        leftover = conn.trailing_data[0]
        if leftover:
            upstream_writer.write(leftover)
        await _pipe_both(reader, writer, upstream_reader, upstream_writer)

    async def _intercept(
        self,
        grant: EgressGrant,
        conn: h11.Connection,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        where: tuple[str, int, str],
        injections: tuple[LiveInjection, ...],
    ) -> None:
        """Connect to the host with TLS verified as usual, answer the CONNECT, speak
        TLS to the sandbox with the run CA's certificate for the host, and relay
        HTTP/1.1 with the secret values put in."""
        host, port, address = where
        assert grant.ca is not None, "a grant with injections has a CA"
        try:
            upstream = await asyncio.wait_for(
                asyncio.open_connection(
                    address, port, ssl=upstream_context(grant.upstream_ca), server_hostname=host
                ),
                CONNECT_TIMEOUT_S,
            )
        except ssl.SSLError as exc:
            await _refuse(
                conn,
                client[1],
                502,
                f"pier egress: {host}:{port} failed TLS verification ({exc.reason or exc})",
            )
            return
        except (OSError, TimeoutError) as exc:
            await _refuse(conn, client[1], 502, f"pier egress: {host}:{port} did not answer ({exc})")
            return
        try:
            client[1].write(
                conn.send(h11.Response(status_code=200, headers=[], reason=b"Connection established"))
            )
            if conn.trailing_data[0]:  # TLS bytes before the 200: no client does this
                return
            try:
                await client[1].start_tls(
                    grant.ca.server_context(host), ssl_handshake_timeout=CONNECT_TIMEOUT_S
                )
            except (ssl.SSLError, OSError, TimeoutError):
                grant.refused[f"{host}:{port} (its TLS client did not trust the run's CA)"] += 1
                raise
            await relay_http(client, upstream, host, port, injections, grant.count_injected)
        except (h11.ProtocolError, OSError, TimeoutError) as exc:
            log.debug("egress: intercepted connection to %s:%s ended: %s", host, port, type(exc).__name__)
        finally:
            upstream[1].close()

    async def _forward(
        self,
        grant: EgressGrant,
        conn: h11.Connection,
        request: h11.Request,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        """Plain HTTP: each request on the client's connection is judged by its URL's
        host (and its own credentials) and sent on, one connection to the host per
        request; the client's connection is kept while both sides keep it."""
        while await self._forward_one(grant, conn, request, client):
            conn.start_next_cycle()
            try:
                event = await asyncio.wait_for(next_event(conn, client[0]), IDLE_S)
            except TimeoutError:
                return
            if not isinstance(event, h11.Request):
                return
            request = event
            found = self._find(_proxy_token(request.headers))
            if found is None:
                await _refuse(
                    conn, client[1], 407, "pier egress: no live pier run holds these proxy credentials"
                )
                return
            grant = found

    async def _forward_one(
        self,
        grant: EgressGrant,
        conn: h11.Connection,
        request: h11.Request,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> bool:
        """One request through, or refused; whether the client's connection can take
        another."""
        try:
            where: Destination = destination(request)
        except NotForwarded as exc:
            await _refuse(conn, client[1], 400, str(exc))
            return False
        address = await _judge(grant, conn, client[1], where.host, where.port, HTTP_PORT)
        if address is None:
            return False
        try:
            upstream = await asyncio.wait_for(asyncio.open_connection(address, where.port), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            await _refuse(conn, client[1], 502, f"pier egress: {where.shown} did not answer ({exc})")
            return False
        toward = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        try:
            headers = outgoing_headers(request.headers, where.authority)
            upstream[1].write(
                toward.send(h11.Request(method=request.method, target=where.target, headers=headers))
            )
            await run_both(
                send_body(conn, client[0], toward, upstream[1]),
                send_answer(toward, upstream[0], conn, client[1], ()),
            )
        except (h11.ProtocolError, OSError) as exc:
            log.debug("egress: plain HTTP to %s ended: %s", where.shown, type(exc).__name__)
            if conn.our_state is h11.SEND_RESPONSE:  # nothing answered yet: say why
                with contextlib.suppress(h11.ProtocolError, OSError):
                    await _refuse(
                        conn, client[1], 502, f"pier egress: {where.shown} gave no HTTP/1.1 answer ({exc})"
                    )
            return False
        finally:
            upstream[1].close()
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE


async def _judge(
    grant: EgressGrant, conn: h11.Connection, writer: asyncio.StreamWriter, host: str, port: int, default: int
) -> str | None:
    """The address the run may reach host:port at, or None once the refusal is
    answered and counted."""
    address, why = await _decide(grant.allow, grant.policy, host, port, default)
    if address is None:
        metrics.egress_connections.labels("refused").inc()
        grant.refused[shown(host.lower().rstrip("."), port, default)] += 1
        await _refuse(conn, writer, 403, why)
        return None
    metrics.egress_connections.labels("allowed").inc()
    return address


async def _read_request(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Request | None:
    """The request: a CONNECT read through its end (h11 switches it to a tunnel only
    once the request has ended and a 2xx has been sent), any other as soon as its
    head is in (its body is the forwarder's to relay)."""
    request = None
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(READ_CHUNK)
            if not data:
                return None
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            if event.method != b"CONNECT":
                return event
            request = event
        elif isinstance(event, h11.EndOfMessage) or event is h11.PAUSED:
            return request
        elif isinstance(event, h11.ConnectionClosed):
            return None


def _proxy_token(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The password of a `Proxy-Authorization: Basic` header (user:token)."""
    for name, value in headers:
        if name.lower() == b"proxy-authorization" and value[:6].lower() == b"basic ":
            try:
                decoded = base64.b64decode(value[6:].strip(), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                return None
            return decoded.partition(":")[2]
    return None


def _split_target(target: str) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    host = host.strip("[]")
    return (host, int(port)) if port.isdigit() else (target, 443)


async def _decide(
    allow: AllowList, policy: OutboundPolicy, host: str, port: int, default_port: int
) -> tuple[str | None, str]:
    """The address to connect to, or None and the message that says why not (never
    anything learned by connecting: refusals come before any connection)."""
    rule = allow.rule_for(host, port)
    where = shown(host.lower().rstrip("."), port, default_port)
    if rule is None:
        listed = ", ".join(allow.patterns) or "nothing"
        return None, (
            f"pier's egress allow-list refused {where}: add it to network.allow (this run allows {listed})"
        )
    loop = asyncio.get_running_loop()
    try:
        addresses = await loop.run_in_executor(None, policy.resolve, host, port)
    except OutboundRefused as exc:
        return None, (
            f"pier egress: {where} is not allowed: {exc.reason} "
            "(the operator can permit it in PIER_OUTBOUND_ALLOW)"
        )
    except OSError as exc:
        return None, f"pier egress: {where} does not resolve ({exc})"
    return addresses[0], ""


async def _refuse(conn: h11.Connection, writer: asyncio.StreamWriter, status: int, message: str) -> None:
    """Answer with message as the body and as the reason phrase: clients show the
    reason ("Tunnel connection failed: 403 pier's egress allow-list refused ...")
    where they do not show a CONNECT's body."""
    body = f"{message}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]  # fmt: skip
    if status == 407:
        headers.append((b"proxy-authenticate", b'Basic realm="pier"'))
    reason = "".join(c if " " <= c <= "~" else "?" for c in message)[:300]
    writer.write(conn.send(h11.Response(status_code=status, headers=headers, reason=reason.encode())))
    writer.write(conn.send(h11.Data(data=body)))
    writer.write(conn.send(h11.EndOfMessage()))
    await writer.drain()


async def _pipe_both(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until both ends are done. Once one side has ended, the other
    gets HALF_CLOSE_GRACE_S to finish, so a client that vanished does not hold a
    tunnel to an idle server open."""
    tasks = [
        asyncio.ensure_future(_pipe(client_reader, upstream_writer)),
        asyncio.ensure_future(_pipe(upstream_reader, client_writer)),
    ]
    try:
        _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if pending:
            await asyncio.wait(pending, timeout=HALF_CLOSE_GRACE_S)
    finally:
        for task in tasks:
            task.cancel()
        upstream_writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(READ_CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        if writer.can_write_eof():
            with contextlib.suppress(OSError):
                writer.write_eof()


_shared: dict[str, EgressProxy] = {}
_shared_lock = threading.Lock()


def shared_proxy(host: str) -> EgressProxy:
    """The process's egress proxy on host, started on first use."""
    with _shared_lock:
        proxy = _shared.get(host)
        if proxy is None:
            proxy = EgressProxy(host).start()
            _shared[host] = proxy
        return proxy
