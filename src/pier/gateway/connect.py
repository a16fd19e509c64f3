"""The gateway's connections to upstreams, each judged by the outbound policy
(pier.outbound) when it is made: the upstream's host is resolved once, every
address it has is checked, and the connection goes to the address checked (TLS
still verifies the host's name). A name that resolves to a public address when
a run is accepted and to 127.0.0.1, a sandbox or the Docker bridge when the
gateway connects is refused, with nothing sent.

The policy is the server's (PIER_OUTBOUND_ALLOW) plus what the operator named
for the run's upstream (pier.agents.upstreams): it rides with each request in a
context variable, since httpcore opens connections in the request's own task.
A proxy named in the environment pier runs in (HTTPS_PROXY) is the operator's,
and allowed."""

from __future__ import annotations

import contextvars
import ssl
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import anyio.to_thread
import httpcore
import httpx

from pier.outbound import Allowed, OutboundPolicy, OutboundRefused, parse_allowed


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
    """httpcore's network backend, connecting only where the policy allows (and
    to extra: the operator's own proxy, for a pool that goes through one)."""

    def __init__(self, default: OutboundPolicy, extra: tuple[Allowed, ...] = ()):
        self._default = default  # for a connection made outside attempt(): the server's policy alone
        self._extra = extra
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
        policy = replace(current.policy, allowed=(*current.policy.allowed, *self._extra))
        try:
            addresses = await anyio.to_thread.run_sync(policy.resolve, host, port, "upstream")
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


def policy_client(policy: OutboundPolicy, verify: ssl.SSLContext | bool, **options: Any) -> httpx.AsyncClient:
    """httpx's client as it is made from pier's environment (HTTPS_PROXY & co.
    included: a proxy there is the operator's), with every connection pool it
    has on PolicyBackend. httpx takes no network backend, so each pool's is set
    (tests/unit/gateway/test_gateway_connect.py sees a loopback upstream refused
    and an environment proxy used). Through a proxy, the proxy resolves the
    upstream: its name was judged when the run was accepted."""
    client = httpx.AsyncClient(verify=verify, **options)
    for transport in [client._transport, *client._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        if pool is None:
            continue
        proxy = getattr(pool, "_proxy_url", None)
        extra = parse_allowed(_hostport(proxy.host.decode(), proxy.port or 80)) if proxy is not None else ()
        pool._network_backend = PolicyBackend(policy, extra)
    return client


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
