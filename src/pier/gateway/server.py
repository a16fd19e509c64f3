"""The model gateway server: uvicorn in a thread of the pier process (pier run,
pier serve), on its own event loop, listening on an address sandboxes reach (the
Docker bridge's) and nowhere else: never 0.0.0.0."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import TypedDict

import httpx
import uvicorn

from pier.errors import SandboxError
from pier.gateway.connect import policy_client
from pier.gateway.grants import Budget, Grant, Grants
from pier.gateway.proxy import create_app
from pier.outbound import Allowed, OutboundPolicy
from pier.serving import bounded_protocol

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30
# A model call may think for minutes before its first byte; connecting may not.
UPSTREAM_TIMEOUT = httpx.Timeout(connect=30, read=900, write=120, pool=60)


class _ClientOptions(TypedDict):
    """The keywords _serve gives httpx's client, typed so mypy can check them
    against AsyncClient's parameters."""

    timeout: httpx.Timeout
    follow_redirects: bool


class Gateway:
    """One listening gateway; runs come and go as grants."""

    def __init__(
        self,
        host: str,
        port: int = 0,
        transport: httpx.AsyncBaseTransport | None = None,
        ca_bundle: Path | None = None,
        policy: OutboundPolicy | None = None,
    ):
        if _unspecified(host):
            raise SandboxError(
                f"PIER_GATEWAY_HOST={host} would expose the model gateway on every interface: "
                "give the address sandboxes reach (the Docker bridge's, e.g. 172.17.0.1)"
            )
        self.grants = Grants()
        self._host = host
        self._sock = _listen(host, port)
        self.port: int = self._sock.getsockname()[1]
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._transport = transport  # tests: a stand-in provider
        # Where it may connect: the outbound policy (PIER_OUTBOUND_ALLOW), plus each grant's own.
        self.policy = policy or OutboundPolicy()
        # Behind a TLS-intercepting proxy the provider's certificate chains to its CA.
        self._verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=ca_bundle) if ca_bundle else True
        )

    @property
    def url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    def start(self) -> Gateway:
        self._thread = threading.Thread(target=self._run, name="pier-gateway", daemon=True)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S):
            raise SandboxError(f"the model gateway did not start on {self.url} within {START_TIMEOUT_S}s")
        return self

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        options: _ClientOptions = {"timeout": UPSTREAM_TIMEOUT, "follow_redirects": False}
        client = (
            httpx.AsyncClient(transport=self._transport, **options)
            if self._transport is not None
            else policy_client(self.policy, self._verify, **options)
        )
        async with client:
            config = uvicorn.Config(
                create_app(self.grants, client, self.policy),
                log_level="warning",
                access_log=False,
                lifespan="off",
                # A sandbox is hostile: the same bounds as pier serve's, at their defaults.
                http=bounded_protocol(),
            )
            self._server = uvicorn.Server(config)
            serving = asyncio.ensure_future(self._server.serve(sockets=[self._sock]))
            while not self._server.started and not serving.done():
                await asyncio.sleep(0.01)
            self._started.set()
            await serving

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()

    def open(
        self,
        trajectory_id: str,
        provider: str,
        key: str,
        upstream: str,
        budget: Budget,
        ttl_s: float,
        allowed: tuple[Allowed, ...] = (),
    ) -> Grant:
        """A grant for one run: its token and where the CLI should send it
        (allowed: what the operator named for upstream, beyond the policy)."""
        expires = time.monotonic() + ttl_s
        grant = Grant(trajectory_id, provider, key, upstream.rstrip("/"), budget, expires, allowed=allowed)
        return self.grants.open(grant)

    def base_url(self, grant: Grant) -> str:
        """The gateway's stand-in for the grant's upstream base URL (same path)."""
        path = httpx.URL(grant.upstream).path.rstrip("/")
        return f"{self.url}/{grant.provider}{path}"

    def close(self, grant: Grant) -> None:
        self.grants.close(grant)


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return host in ("", "*")


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise SandboxError(
            f"the model gateway cannot listen on {host}:{port} ({exc}): set PIER_GATEWAY_HOST to an "
            "address of this machine that sandboxes reach, or PIER_GATEWAY_PORT to a free port"
        ) from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock


_shared: dict[tuple[str, int], Gateway] = {}
_shared_lock = threading.Lock()


def shared_gateway(
    host: str, port: int, ca_bundle: Path | None = None, policy: OutboundPolicy | None = None
) -> Gateway:
    """The process's gateway on host:port, started on first use and kept for the
    process's life (pier serve runs many runs through one), connecting where
    policy (the server's outbound policy) allows."""
    with _shared_lock:
        gateway = _shared.get((host, port))
        if gateway is None:
            gateway = Gateway(host, port, ca_bundle=ca_bundle, policy=policy).start()
            _shared[(host, port)] = gateway
        return gateway
