"""The gateway's connections to upstreams, each judged by the outbound policy
(pier.outbound) when it is made: the upstream's host is resolved once, every
address it has is checked, and the connection goes to the address checked (TLS
still verifies the host's name). A name that resolves to a public address when
a run is accepted and to 127.0.0.1, a sandbox or the Docker bridge when the
gateway connects is refused, with nothing sent.

The policy is the server's (PIER_OUTBOUND_ALLOW) plus what the operator named
for the run's upstream (pier.agents.upstreams): it rides with each request in a
context variable, since httpcore opens connections in the request's own task."""

from __future__ import annotations

import contextvars
import ssl
from collections.abc import Iterable
from dataclasses import dataclass, replace

import anyio.to_thread
import httpcore
import httpx

from pier.outbound import Allowed, OutboundPolicy, OutboundRefused


@dataclass
class Attempt:
    """One request's connection rules, and the refusal if the policy said no."""

    policy: OutboundPolicy
    refused: str | None = None


_attempt: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar(
    "pier_gateway_attempt", default=None
)


def attempt(policy: OutboundPolicy, allowed: Iterable[Allowed] = ()) -> Attempt:
    """Set the rules for the connections this task makes next; returns them, to
    read the refusal after."""
    made = Attempt(replace(policy, allowed=(*policy.allowed, *allowed)))
    _attempt.set(made)
    return made


class PolicyBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, connecting only where the policy allows."""

    def __init__(self, default: OutboundPolicy):
        self._default = default  # for a connection made outside attempt(): the server's policy alone
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        current = _attempt.get() or Attempt(self._default)
        try:
            addresses = await anyio.to_thread.run_sync(current.policy.resolve, host, port, "upstream")
        except OutboundRefused as exc:
            current.refused = str(exc)
            raise httpcore.ConnectError(str(exc)) from None
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} does not resolve ({exc})") from None
        return await self._inner.connect_tcp(addresses[0], port, timeout, local_address, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("the model gateway connects to no Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def policy_transport(policy: OutboundPolicy, verify: ssl.SSLContext | bool) -> httpx.AsyncHTTPTransport:
    """httpx's transport with its connection pool on PolicyBackend. httpx takes no
    network backend, so its pool is replaced by an equal one that has it (the
    gateway's tests connect through this to a listener on loopback and see it refused)."""
    transport = httpx.AsyncHTTPTransport(verify=verify)
    limits = httpx.Limits()
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify=verify),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=PolicyBackend(policy),
    )
    return transport
