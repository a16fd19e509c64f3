"""The egress proxy on 127.0.0.1 in front of a local echo server: tunnels what the
allow-list holds, refuses the rest with a message, knows runs by their token."""

from __future__ import annotations

import base64
import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from pier.egress import EgressProxy, allow_list
from pier.egress.allow import refuse_disallowed
from pier.errors import InputError
from pier.outbound import OutboundPolicy, OutboundRefused, allowing


class Echo(socketserver.BaseRequestHandler):
    connections = 0

    def handle(self) -> None:
        Echo.connections += 1
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo_port() -> Iterator[int]:
    Echo.connections = 0
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy() -> Iterator[EgressProxy]:
    made = EgressProxy("127.0.0.1").start()
    yield made
    made.stop()


def connect(
    proxy: EgressProxy, target: str, token: str | None, extra: bytes = b""
) -> tuple[str, socket.socket]:
    """Sends a CONNECT (and extra bytes right behind it); the proxy's answer head and the socket."""
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    head = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
    if token is not None:
        head += f"Proxy-Authorization: Basic {base64.b64encode(f'pier:{token}'.encode()).decode()}\r\n"
    sock.sendall(head.encode() + b"\r\n" + extra)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(4096)
    head_part, _, body = answer.partition(b"\r\n\r\n")
    if b"content-length" in head_part.lower():
        length = int(head_part.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += sock.recv(4096)
    return (head_part + b"\n" + body).decode(), sock


def opted_in(port: int) -> OutboundPolicy:
    """The operator lets runs reach the echo server on loopback (PIER_OUTBOUND_ALLOW)."""
    return allowing([f"127.0.0.1:{port}"])


def test_a_listed_address_is_tunnelled_both_ways(proxy, echo_port):
    grant = proxy.open("run-1", allow_list([f"127.0.0.1:{echo_port}"]), ttl_s=60, policy=opted_in(echo_port))
    answer, sock = connect(proxy, f"127.0.0.1:{echo_port}", grant.token, extra=b"early ")
    assert answer.startswith("HTTP/1.1 200")
    sock.sendall(b"bytes")
    # the echo of "early " may have come in the same read as the proxy's answer
    received = answer.split("\r\n")[-1].partition("\n")[2].encode()
    while len(received) < len(b"early bytes"):
        received += sock.recv(4096)
    assert received == b"early bytes"
    sock.close()


def test_unlisted_names_and_other_ports_are_refused_with_a_message(proxy, echo_port):
    grant = proxy.open(
        "run-1", allow_list(["pypi.org", f"127.0.0.1:{echo_port}"]), ttl_s=60, policy=opted_in(echo_port)
    )
    answer, _ = connect(proxy, "example.org:443", grant.token)
    assert answer.startswith("HTTP/1.1 403")
    assert (
        "pier egress: example.org:443 is not in this run's network allow-list (pypi.org, 127.0.0.1:" in answer
    )
    other_port, _ = connect(proxy, f"127.0.0.1:{echo_port + 1}", grant.token)
    assert other_port.startswith("HTTP/1.1 403")
    assert grant.refused == ["example.org:443", f"127.0.0.1:{echo_port + 1}"]


def test_runs_are_known_by_their_live_token_only(proxy, echo_port):
    grant = proxy.open("run-1", allow_list([f"127.0.0.1:{echo_port}"]), ttl_s=60, policy=opted_in(echo_port))
    for token in (None, "pier-egress-guess"):
        answer, _ = connect(proxy, f"127.0.0.1:{echo_port}", token)
        assert answer.startswith("HTTP/1.1 407") and 'Basic realm="pier"' in answer
    proxy.close(grant)
    answer, _ = connect(proxy, f"127.0.0.1:{echo_port}", grant.token)
    assert answer.startswith("HTTP/1.1 407")


def test_plain_http_is_not_proxied(proxy):
    grant = proxy.open("run-1", allow_list(["pypi.org"]), ttl_s=60)
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    auth = base64.b64encode(f"pier:{grant.token}".encode()).decode()
    sock.sendall(
        f"GET http://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode()
    )
    assert sock.recv(4096).startswith(b"HTTP/1.1 405")


def test_allow_list_entries():
    rules = allow_list(["PyPI.org", "*.npmjs.org", "git.corp:8443", "10.0.0.5:5432", "[::1]:80"])
    assert rules.rule_for("pypi.org", 443) and rules.rule_for("pypi.org.", 80)
    assert not rules.rule_for("pypi.org", 22) and not rules.rule_for("evil-pypi.org", 443)
    assert rules.rule_for("registry.npmjs.org", 443) and not rules.rule_for("npmjs.org", 443)
    assert not rules.rule_for("registry.npmjs.org.evil.com", 443)
    assert rules.rule_for("git.corp", 8443) and not rules.rule_for("git.corp", 443)
    assert rules.rule_for("10.0.0.5", 5432) and rules.rule_for("::1", 80)
    for bad in ("", "http://pypi.org", "*", "a.*.org", "pypi.org:99999", "*.org x"):
        with pytest.raises(InputError, match=r"network\.allow"):
            allow_list([bad])


def test_a_listed_local_destination_is_refused_before_any_connection(proxy, echo_port):
    """Listing 127.0.0.1:P (or a name resolving there) is not enough: without the
    operator's PIER_OUTBOUND_ALLOW the proxy refuses it and never connects."""
    grant = proxy.open("run-1", allow_list([f"127.0.0.1:{echo_port}", f"localhost:{echo_port}"]), ttl_s=60)
    for target in (f"127.0.0.1:{echo_port}", f"localhost:{echo_port}"):
        answer, _ = connect(proxy, target, grant.token)
        assert answer.startswith("HTTP/1.1 403"), answer
        assert "is not allowed" in answer and "loopback" in answer and "PIER_OUTBOUND_ALLOW" in answer
    assert Echo.connections == 0


def test_a_name_rebinding_to_loopback_is_refused_at_connect_time(proxy, echo_port):
    """Public when the run was accepted, loopback when the proxy resolves it."""
    rebinding = OutboundPolicy(resolver=lambda host, port: ["127.0.0.1"])
    grant = proxy.open("run-1", allow_list([f"rebind.example:{echo_port}"]), ttl_s=60, policy=rebinding)
    answer, _ = connect(proxy, f"rebind.example:{echo_port}", grant.token)
    assert answer.startswith("HTTP/1.1 403") and "resolves to 127.0.0.1" in answer
    assert Echo.connections == 0


@pytest.mark.parametrize("entry", ["127.0.0.1", "localhost", "::1", "[::1]:443", "169.254.169.254", "10.0.0.1",
                                   "0.0.0.0", "[::ffff:127.0.0.1]:80", "fd00::1"])  # fmt: skip
def test_local_allow_list_entries_are_refused_where_given(entry):
    with pytest.raises(OutboundRefused) as caught:
        refuse_disallowed([entry], OutboundPolicy())
    message = str(caught.value)
    assert message.startswith(f"network.allow: '{entry}' is not an allowed destination")
    assert "PIER_OUTBOUND_ALLOW" in message


def test_a_name_resolving_to_loopback_is_refused_where_given():
    hosts_file = OutboundPolicy(resolver=lambda host, port: {"sneaky.example": ["127.0.0.1"]}[host])
    with pytest.raises(OutboundRefused, match=r"'sneaky.example'.*resolves to 127.0.0.1"):
        refuse_disallowed(["sneaky.example"], hosts_file)


def test_the_operator_setting_permits_an_entry():
    refuse_disallowed(["10.0.0.5:5432", "127.0.0.1:8080"], allowing(["10.0.0.0/8", "127.0.0.1:8080"]))
    with pytest.raises(OutboundRefused):
        refuse_disallowed(["127.0.0.1:8081"], allowing(["127.0.0.1:8080"]))
