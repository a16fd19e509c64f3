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
    message = (
        "pier's egress allow-list refused example.org: add it to network.allow (this run allows pypi.org, 127"
    )
    assert answer.startswith(f"HTTP/1.1 403 {message}")  # the reason phrase: what clients show for a CONNECT
    assert message in answer.split("\n", 1)[1]  # and the body
    other_port, _ = connect(proxy, f"127.0.0.1:{echo_port + 1}", grant.token)
    assert other_port.startswith(f"HTTP/1.1 403 pier's egress allow-list refused 127.0.0.1:{echo_port + 1}: ")
    connect(proxy, "example.org:443", grant.token)
    assert grant.refused == {"example.org": 2, f"127.0.0.1:{echo_port + 1}": 1}
    assert Echo.connections == 0


def test_runs_are_known_by_their_live_token_only(proxy, echo_port):
    grant = proxy.open("run-1", allow_list([f"127.0.0.1:{echo_port}"]), ttl_s=60, policy=opted_in(echo_port))
    for token in (None, "pier-egress-guess"):
        answer, _ = connect(proxy, f"127.0.0.1:{echo_port}", token)
        assert answer.startswith("HTTP/1.1 407") and 'Basic realm="pier"' in answer
    proxy.close(grant)
    answer, _ = connect(proxy, f"127.0.0.1:{echo_port}", grant.token)
    assert answer.startswith("HTTP/1.1 407")


class CountingHTTP(socketserver.BaseRequestHandler):
    """An HTTP origin that counts connections and answers with the request it got."""

    connections = 0

    def handle(self) -> None:
        CountingHTTP.connections += 1
        head = b""
        while b"\r\n\r\n" not in head and (data := self.request.recv(4096)):
            head += data
        head, _, body = head.partition(b"\r\n\r\n")
        if b"content-length: " in head.lower():
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(body) < length:
                body += self.request.recv(4096)
        answer = head + b"\n--\n" + body
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))


@pytest.fixture
def origin_port() -> Iterator[int]:
    CountingHTTP.connections = 0
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), CountingHTTP)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def through(proxy: EgressProxy, request: bytes) -> tuple[bytes, socket.socket]:
    """Sends request to the proxy as a plain-HTTP proxy client would; the whole
    answer (head and a Content-Length body) and the socket."""
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    sock.sendall(request)
    return read_answer(sock), sock


def read_answer(sock: socket.socket) -> bytes:
    answer = b""
    while b"\r\n\r\n" not in answer:
        data = sock.recv(4096)
        if not data:
            return answer
        answer += data
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(4096)
    return head + b"\r\n\r\n" + body


def auth(token: str) -> str:
    return "Proxy-Authorization: Basic " + base64.b64encode(f"pier:{token}".encode()).decode()


def test_plain_http_to_a_listed_host_is_forwarded_in_origin_form(proxy, origin_port):
    grant = proxy.open(
        "run-1", allow_list([f"127.0.0.1:{origin_port}"]), ttl_s=60, policy=opted_in(origin_port)
    )
    url = f"http://127.0.0.1:{origin_port}/debian/dists/bookworm/Release?x=1"
    request = (f"POST {url} HTTP/1.1\r\nHost: 127.0.0.1:{origin_port}\r\n{auth(grant.token)}\r\n"
               "Proxy-Connection: keep-alive\r\nContent-Length: 4\r\n\r\nbody")  # fmt: skip
    answer, sock = through(proxy, request.encode())
    assert answer.startswith(b"HTTP/1.1 200"), answer
    seen = answer.partition(b"\r\n\r\n")[2].lower()
    assert seen.startswith(b"post /debian/dists/bookworm/release?x=1 http/1.1\r\n")
    assert f"host: 127.0.0.1:{origin_port}".encode() in seen and seen.endswith(b"\n--\nbody")
    assert b"proxy-authorization" not in seen and b"proxy-connection" not in seen  # the token stays here
    # the client's connection takes a second request (apt's and pip's keep-alive)
    sock.sendall(f"GET http://127.0.0.1:{origin_port}/two HTTP/1.1\r\nHost: 127.0.0.1:{origin_port}\r\n"
                 f"{auth(grant.token)}\r\n\r\n".encode())  # fmt: skip
    assert b"get /two http/1.1" in read_answer(sock).lower()
    assert CountingHTTP.connections == 2 and not grant.refused


def test_plain_http_to_an_unlisted_host_is_refused_with_the_message(proxy, origin_port):
    """Listed on another port, or not at all: 403 with the message, and no
    connection reaches the origin."""
    grant = proxy.open("run-1", allow_list(["pypi.org"]), ttl_s=60, policy=opted_in(origin_port))
    for url, host in ((f"http://127.0.0.1:{origin_port}/", f"127.0.0.1:{origin_port}"),
                      ("http://example.org/simple/", "example.org")):  # fmt: skip
        request = f"GET {url} HTTP/1.1\r\nHost: {host}\r\n{auth(grant.token)}\r\n\r\n"
        answer, _ = through(proxy, request.encode())
        message = (
            f"pier's egress allow-list refused {host}: add it to network.allow (this run allows pypi.org)"
        )
        assert answer.startswith(b"HTTP/1.1 403 "), answer
        assert answer.endswith(f"\r\n\r\n{message}\n".encode()), answer
    assert grant.refused == {f"127.0.0.1:{origin_port}": 1, "example.org": 1}
    assert CountingHTTP.connections == 0


def test_a_host_header_naming_another_host_is_refused(proxy, origin_port):
    """The host judged is the host reached: a Host header for an unlisted site
    behind a listed address (a CDN's virtual hosts) is not sent on."""
    grant = proxy.open(
        "run-1", allow_list([f"127.0.0.1:{origin_port}"]), ttl_s=60, policy=opted_in(origin_port)
    )
    request = (
        f"GET http://127.0.0.1:{origin_port}/ HTTP/1.1\r\nHost: example.org\r\n{auth(grant.token)}\r\n\r\n"
    )
    answer, _ = through(proxy, request.encode())
    assert answer.startswith(b"HTTP/1.1 400") and b"Host header names example.org" in answer
    origin_form = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{origin_port}\r\n{auth(grant.token)}\r\n\r\n"
    answer, _ = through(proxy, origin_form.encode())
    assert answer.startswith(b"HTTP/1.1 400") and b"http_proxy" in answer
    assert CountingHTTP.connections == 0


def test_plain_http_needs_a_live_token_on_every_request(proxy, origin_port):
    grant = proxy.open(
        "run-1", allow_list([f"127.0.0.1:{origin_port}"]), ttl_s=60, policy=opted_in(origin_port)
    )
    first = f"GET http://127.0.0.1:{origin_port}/ HTTP/1.1\r\nHost: 127.0.0.1:{origin_port}\r\n"
    answer, _ = through(proxy, (first + "\r\n").encode())
    assert answer.startswith(b"HTTP/1.1 407")
    answer, sock = through(proxy, (first + auth(grant.token) + "\r\n\r\n").encode())
    assert answer.startswith(b"HTTP/1.1 200")
    sock.sendall((first + "\r\n").encode())  # the next request on the same connection, without
    assert read_answer(sock).startswith(b"HTTP/1.1 407")
    assert CountingHTTP.connections == 1


def test_plain_http_to_a_listed_loopback_name_is_refused_by_the_outbound_policy(proxy, origin_port):
    grant = proxy.open("run-1", allow_list([f"localhost:{origin_port}"]), ttl_s=60)
    request = f"GET http://localhost:{origin_port}/ HTTP/1.1\r\nHost: localhost:{origin_port}\r\n{auth(grant.token)}\r\n\r\n"
    answer, _ = through(proxy, request.encode())
    assert answer.startswith(b"HTTP/1.1 403") and b"PIER_OUTBOUND_ALLOW" in answer
    assert CountingHTTP.connections == 0


def test_an_origin_that_does_not_speak_http_is_answered_502(proxy, echo_port):
    """The echo server sends the request back: not an HTTP response."""
    grant = proxy.open("run-1", allow_list([f"127.0.0.1:{echo_port}"]), ttl_s=60, policy=opted_in(echo_port))
    request = f"GET http://127.0.0.1:{echo_port}/ HTTP/1.1\r\nHost: 127.0.0.1:{echo_port}\r\n{auth(grant.token)}\r\n\r\n"
    answer, _ = through(proxy, request.encode())
    assert answer.startswith(
        f"HTTP/1.1 502 pier egress: 127.0.0.1:{echo_port} gave no HTTP/1.1 answer".encode()
    )
    assert Echo.connections == 1


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
