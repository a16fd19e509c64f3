"""A run's side of egress by allow-list: its grant on the process's egress proxy,
and what its sandbox needs to use it (network, resolvers, proxy variables, and
apt's proxy file)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import certifi

from pier.egress.allow import allow_list
from pier.egress.inject import LiveInjection
from pier.egress.proxy import EgressGrant, EgressProxy, shared_proxy
from pier.outbound import OutboundPolicy
from pier.sandbox.base import SandboxBackend
from pier.sandbox.dockerfile import CA_PATH, ca_env

APT_PROXY_FILE = "/etc/apt/apt.conf.d/99pier-egress-proxy"


@dataclass
class EgressRun:
    network: str  # the internal Docker network
    address: str  # this machine's address on it: the proxy's and the model gateway's
    subnet: str  # the sandboxes' addresses there
    proxy: EgressProxy
    grant: EgressGrant
    backend: SandboxBackend
    warning: str | None = None  # why host services may still be reachable

    def env(self) -> dict[str, str]:
        """Every exec's proxy variables, for both schemes (HTTPS through CONNECT,
        plain HTTP forwarded); the model gateway on this machine's address is
        reached directly (no_proxy)."""
        url = self.proxy.proxy_url(self.grant)
        direct = f"{self.address},localhost,127.0.0.1"
        return {"HTTPS_PROXY": url, "https_proxy": url, "HTTP_PROXY": url, "http_proxy": url,
                "NO_PROXY": direct, "no_proxy": direct}  # fmt: skip

    def files(self) -> dict[str, bytes]:
        """The proxy for tools that do not always see the environment: apt, run
        under sudo (which drops http_proxy) or by a script that clears it, gets it
        from its configuration's drop-in folder. Harmless in an image without apt."""
        url = self.proxy.proxy_url(self.grant)
        text = f'Acquire::http::Proxy "{url}";\nAcquire::https::Proxy "{url}";\n'
        return {APT_PROXY_FILE: text.encode()}

    def trust(self, operator_bundle: bytes | None) -> tuple[dict[str, str], dict[str, bytes]]:
        """With injected secrets, the sandbox's TLS variables and the bundle they
        point at: the operator's CAs (PIER_CA_BUNDLE) or else Mozilla's (certifi),
        plus the run's own CA, which vouches only for the secrets' hosts. Without,
        nothing changes."""
        if self.grant.ca is None:
            return {}, {}
        base = operator_bundle if operator_bundle is not None else Path(certifi.where()).read_bytes()
        return ca_env(), {CA_PATH: base.rstrip(b"\n") + b"\n" + self.grant.ca.pem}

    def admit_port(self, port: int) -> None:
        """Let the sandbox reach another pier service on this machine's address."""
        self.warning = self.warning or self.backend.admit(self.address, port)

    def close(self) -> None:
        self.proxy.close(self.grant)


def open_egress(
    backend: SandboxBackend,
    network: str,
    trajectory_id: str,
    entries: tuple[str, ...],
    ttl_s: float,
    injections: tuple[LiveInjection, ...] = (),
    upstream_ca: Path | None = None,
    policy: OutboundPolicy | None = None,
) -> EgressRun:
    """The run's egress: the internal network (made if missing), the proxy on this
    machine's address there, a grant for the run's allow-list (and the secrets it
    puts in). Raises SandboxError."""
    internal = backend.ensure_internal_network(network)
    proxy = shared_proxy(internal.address)
    grant = proxy.open(trajectory_id, allow_list(entries), ttl_s, injections, upstream_ca, policy)
    warning = backend.admit(internal.address, proxy.port)
    return EgressRun(network, internal.address, internal.subnet, proxy, grant, backend, warning=warning)
