"""The gateway's own connections go through the outbound policy at connect time:
a grant whose upstream is on loopback (or a name that resolves there when the
gateway connects) reaches nothing, the sandbox is told why with a 403 it does
not retry, and the run learns it; the operator's named upstream is reached."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from pier.gateway import Budget, Gateway
from pier.outbound import OutboundPolicy, parse_allowed


class Counting:
    """A listener on 127.0.0.1 that counts connections and answers 200."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.seen: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(5)
                try:
                    self.seen.append(conn.recv(65536))
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
                except OSError:
                    pass


@pytest.fixture
def listener() -> Iterator[Counting]:
    made = Counting()
    yield made
    made.sock.close()


def table(host: str, port: int) -> list[str]:
    """DNS for these tests: a name that now points at loopback (rebinding)."""
    return {"rebound.example": ["127.0.0.1"], "localhost": ["127.0.0.1", "::1"]}[host]


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    made = Gateway("127.0.0.1", policy=OutboundPolicy(resolver=table)).start()  # the real transport
    yield made
    made.stop()


def call(gateway: Gateway, grant) -> httpx.Response:
    base = gateway.base_url(grant)
    return httpx.post(
        f"{base}/v1/messages", headers={"x-api-key": grant.token}, json={"model": "m"}, timeout=30
    )


@pytest.mark.parametrize("host", ["127.0.0.1", "[::ffff:127.0.0.1]", "rebound.example", "localhost"])
def test_an_upstream_on_loopback_is_never_connected_to(gateway: Gateway, listener: Counting, host: str):
    grant = gateway.open("run-1", "anthropic", "sk-operator", f"http://{host}:{listener.port}", Budget(), 60)
    answer = call(gateway, grant)
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["type"] == "upstream_refused"
    assert "PIER_OUTBOUND_ALLOW" in answer.text and "loopback" in answer.text
    assert grant.upstream_refused is not None and "loopback" in grant.upstream_refused
    assert listener.connections == 0


def test_the_upstream_the_operator_named_is_reached(gateway: Gateway, listener: Counting):
    allowed = parse_allowed(f"127.0.0.1:{listener.port}")
    grant = gateway.open("run-1", "anthropic", "sk-operator", f"http://127.0.0.1:{listener.port}", Budget(), 60,
                         allowed=allowed)  # fmt: skip
    answer = call(gateway, grant)
    assert answer.status_code == 200, answer.text
    assert listener.connections == 1 and b"x-api-key: sk-operator" in listener.seen[0]
    # another port of the same address is not what the operator named
    other = gateway.open(
        "run-2", "anthropic", "sk-operator", "http://127.0.0.1:9", Budget(), 60, allowed=allowed
    )
    assert call(gateway, other).status_code == 403


def test_tls_to_the_checked_address_still_verifies_the_upstream(tmp_path):
    """The connection goes to the address the policy checked; TLS is that of the
    upstream, verified against the operator's CA bundle (PIER_CA_BUNDLE)."""
    from tests.support.tls_server import TLSServer

    upstream = TLSServer("127.0.0.1", tmp_path).start()
    gateway = Gateway("127.0.0.1", ca_bundle=upstream.ca_file, policy=OutboundPolicy(resolver=table)).start()
    try:
        allowed = parse_allowed(upstream.address)
        grant = gateway.open("run-1", "anthropic", "sk-operator", f"https://{upstream.address}", Budget(), 60,
                             allowed=allowed)  # fmt: skip
        answer = httpx.get(
            f"{gateway.base_url(grant)}/v1/models", headers={"x-api-key": grant.token}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        assert upstream.seen and upstream.seen[0]["x-api-key"] == "sk-operator"
    finally:
        gateway.stop()
        upstream.stop()


def test_a_proxy_in_pier_s_environment_is_the_operator_s_and_used(monkeypatch, listener: Counting):
    """HTTPS_PROXY where pier runs (an operator behind a corporate proxy): the
    gateway connects through it, though it is on loopback, and the proxy is
    asked for the upstream by name."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{listener.port}")
    gateway = Gateway("127.0.0.1", policy=OutboundPolicy(resolver=table)).start()
    try:
        grant = gateway.open("run-1", "anthropic", "sk-operator", "https://api.anthropic.com", Budget(), 60)
        call(gateway, grant)  # the stand-in proxy cannot speak TLS: the answer is an error
    finally:
        gateway.stop()
    assert listener.connections == 1 and listener.seen[0].startswith(b"CONNECT api.anthropic.com:443")
    assert grant.upstream_refused is None
