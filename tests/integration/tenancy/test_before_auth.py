"""Nothing before authentication, nothing unbounded: what a caller without a
token (or with one) can make the server read, hold or crash on."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from tests.support.api_server import ADMIN_TOKEN, Collection, Server, make_collection

pytestmark = pytest.mark.integration

BIG = 60 << 20


def rss_bytes(server: Server) -> int:
    assert server.proc is not None
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def settled_rss(server: Server) -> int:
    """The server's RSS once it stops growing by itself: a server just started
    may still load what it preloads in the background (statsmodels, once it
    has an experiment), which is not the request's cost."""
    last = rss_bytes(server)
    for _ in range(60):
        time.sleep(0.5)
        now = rss_bytes(server)
        if abs(now - last) < 1 << 20:
            return now
        last = now
    return last


def raw_request(server: Server, head: str, body_bytes: int, chunk: bytes = b"[" * (1 << 16)) -> bytes:
    """Send `head`, then up to body_bytes of body from another thread, and
    return what the server answers (its first bytes) while the body is still
    on its way."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(head.encode())

    def push() -> None:
        sent = 0
        try:
            while sent < body_bytes:
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the server closed the connection: what it was meant to do

    pusher = threading.Thread(target=push, daemon=True)
    pusher.start()
    try:
        answer = sock.recv(4096)
    finally:
        pusher.join(30)
        sock.close()
    return answer


def test_an_unauthenticated_60_mb_body_is_refused_before_it_is_read(server: Server):
    """Before: the body was read and parsed whole before the 401 (RSS 150 MB ->
    1.76 GB, /health/live 12.7 s)."""
    small = "POST /api/v1/run/x/y HTTP/1.1\r\nHost: pier\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n"
    raw_request(server, small, 2, b"{}")  # what a first request loads, loaded
    before = settled_rss(server)
    head = (
        "POST /api/v1/run/x/y HTTP/1.1\r\nHost: pier\r\nContent-Type: application/json\r\n"
        f"Content-Length: {BIG}\r\n\r\n"
    )
    answers = [raw_request(server, head, BIG) for _ in range(2)]
    chunked = "POST /api/v1/run/x/y HTTP/1.1\r\nHost: pier\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"10000\r\n" + b"[" * 0x10000 + b"\r\n"
    answers.append(raw_request(server, chunked, BIG, chunk))
    grown = rss_bytes(server) - before
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert grown < 20 << 20, f"the server's RSS grew by {grown >> 20} MB"
    started = time.monotonic()
    assert httpx.get(f"{server.url}/health/live", timeout=10).status_code == 200
    assert time.monotonic() - started < 1.0


@pytest.fixture
def collection(server: Server) -> Collection:
    made = make_collection(server, "pier-fake:latest", prefix="limits")
    made.put_task("t", "echo hi")
    return made


def deep(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def test_deep_json_is_refused_naming_the_limit_never_a_500(server: Server, collection: Collection):
    """Before: `[` * 980 without a token was a 500 (RecursionError), and
    init_params nested 300 deep with one a 500 in masking."""
    brackets = "[" * 980 + "]" * 980
    headers = {"Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        r = anonymous.post(f"/api/v1/run/{collection.name}/t", content=brackets, headers=headers)
        assert r.status_code == 401, r.text
    with collection.client() as c:
        r = c.post(f"/api/v1/run/{collection.name}/t", content=brackets, headers=headers)
        assert r.status_code == 422 and "PIER_MAX_JSON_DEPTH" in r.text, r.text
        r = c.post(f"/api/v1/run/{collection.name}/t", json={"init_params": deep(300)})
        assert r.status_code == 422 and "PIER_MAX_JSON_DEPTH" in r.text, r.text
        form = {"init_params": json.dumps(deep(300))}
        r = c.post(f"/api/v1/run/{collection.name}/t", data=form, files={"files": ("a.txt", b"a")})
        assert r.status_code == 422 and "PIER_MAX_JSON_DEPTH" in r.text, r.text
        runbook = "---\nagent: script\nimage: x\nvars: " + "[" * 5000 + "]" * 5000 + "\n---\n# t\n"
        r = c.put(
            f"/api/v1/tasks/{collection.name}/deep",
            content=runbook,
            headers={"Content-Type": "text/markdown"},
        )
        assert r.status_code == 422, r.text
        # 64 levels is still fine
        r = c.post(f"/api/v1/run/{collection.name}/t", json={"init_params": {"vars": deep(60)}})
        assert r.status_code != 500, r.text[:300]


def test_a_json_body_over_its_cap_is_refused_naming_the_setting(server: Server, collection: Collection):
    body = json.dumps({"init_params": {"vars": {"x": "a" * (2 << 20)}}})
    with collection.client() as c:
        r = c.post(
            f"/api/v1/run/{collection.name}/t", content=body, headers={"Content-Type": "application/json"}
        )
    assert r.status_code == 413 and "PIER_MAX_JSON_BYTES" in r.text, r.text[:300]


def test_slow_clients_are_cut_off_by_the_header_and_body_timeouts(server: Server):
    """Before: 800 connections sending a header byte now and then were all held 150 s."""
    socks = []
    for _ in range(50):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: pier\r\nX-Slow: ")  # never ends its head
        socks.append(sock)
    idle = socket.create_connection(("127.0.0.1", server.port), timeout=10)  # sends nothing at all
    socks.append(idle)
    token = ADMIN_TOKEN
    body_stall = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    body_stall.sendall(
        f"POST /api/v1/collections HTTP/1.1\r\nHost: pier\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode()
    )
    socks.append(body_stall)
    started = time.monotonic()
    answers = [_until_closed(sock, started + 8) for sock in socks]
    waited = time.monotonic() - started
    assert waited < 6, f"slow connections held {waited:.1f}s"
    assert all(a in (b"", b"HTTP/1.1 408 Request Timeout") for a in answers), answers[:3]
    assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200


def _until_closed(sock: socket.socket, deadline: float) -> bytes:
    """What the server answers before it closes the connection (b"" for
    nothing); a connection still open at `deadline` counts as held."""
    got = b""
    sock.settimeout(max(deadline - time.monotonic(), 0.01))
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except OSError:
        pass
    finally:
        sock.close()
    return got.split(b"\r\n")[0] if got else b""


def _one_response(sock: socket.socket) -> bytes:
    """One whole response (head and its Content-Length body), however the
    server's writes were split into segments: what is left on the socket after
    it is the server's next word, not the tail of this answer."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(4096)
        assert chunk, f"closed mid-head: {got!r}"
        got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")[1:]
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(4096)
        assert chunk, f"closed mid-body: {body!r}"
        body += chunk
    assert len(body) == length, f"more than one response: {body!r}"
    return head


def _head_answer(port: int, head: bytes, then: int = 0, source: str = "127.0.0.1") -> bytes:
    """Send `head` then `then` bytes of one header's value (from another
    thread); the status line the server answers."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60, source_address=(source, 0))
    sock.sendall(head)

    def push() -> None:
        chunk = b"a" * (1 << 16)
        try:
            for _ in range(then // len(chunk)):
                sock.sendall(chunk)
            sock.sendall(b"\r\n\r\n")
        except OSError:
            pass  # the server closed it: what it was meant to do

    pusher = threading.Thread(target=push, daemon=True)
    pusher.start()
    try:
        answer = sock.recv(4096)
    finally:
        pusher.join(120)
        sock.close()
    return answer.split(b"\r\n")[0]


def test_ten_40_mib_headers_are_refused_431_without_growing_the_server(server: Server):
    """Before: no header limit; each header was read whole (quadratically,
    piece by piece) before a 401: ten at once grew the server by 70-450 MB and
    some were still arriving past the header timeout (408)."""
    import psutil

    assert server.proc is not None
    proc = psutil.Process(server.proc.pid)
    head = b"GET /api/v1/runs HTTP/1.1\r\nHost: pier\r\nX-Big: "
    _head_answer(server.port, head, 1 << 20)  # what a first request loads, loaded
    before = settled_rss(server)
    peak = before
    answers: list[bytes] = []

    def one() -> None:
        answers.append(_head_answer(server.port, head, 40 << 20))

    threads = [threading.Thread(target=one) for _ in range(10)]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, proc.memory_info().rss)
        time.sleep(0.05)
    grown = peak - before
    assert answers == [b"HTTP/1.1 431 Request Header Fields Too Large"] * 10, answers
    assert grown < 50 << 20, f"the server's RSS grew by {grown >> 20} MB"


def test_a_long_request_line_is_414_and_long_or_many_headers_431(server: Server):
    get = b"GET /health HTTP/1.1\r\nHost: pier\r\n"
    assert _head_answer(server.port, b"GET /" + b"a" * (9 << 10) + b" HTTP/1.1\r\n") == (
        b"HTTP/1.1 414 URI Too Long"
    )
    one_long_line = get + b"X-Long: " + b"a" * (9 << 10) + b"\r\n\r\n"
    assert _head_answer(server.port, one_long_line).startswith(b"HTTP/1.1 431")
    many_lines = get + b"".join(b"X-%d: %s\r\n" % (n, b"a" * 1000) for n in range(40)) + b"\r\n"
    assert _head_answer(server.port, many_lines).startswith(b"HTTP/1.1 431")
    # Under the bounds, a request is served as before.
    fine = get + b"".join(b"X-%d: %s\r\n" % (n, b"a" * 1000) for n in range(20))
    assert _head_answer(server.port, fine + b"X-Line: " + b"a" * 7000 + b"\r\n\r\n").startswith(
        b"HTTP/1.1 200"
    )


def test_connections_that_never_send_a_byte_are_closed_within_the_header_timeout(server: Server):
    """The module's server has PIER_HTTP_HEADER_TIMEOUT_SEC=1: 200 silent
    connections and one idle after a request are all closed within it."""
    started = time.monotonic()
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(200)]
    after_one = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    after_one.sendall(b"GET /health HTTP/1.1\r\nHost: pier\r\n\r\n")
    assert _one_response(after_one).startswith(b"HTTP/1.1 200")
    answers = [_until_closed(sock, started + 8) for sock in [*socks, after_one]]
    waited = time.monotonic() - started
    assert waited < 1 + 5 + 2, f"idle connections held {waited:.1f}s"  # the keep-alive bound is 5 s
    assert set(answers) <= {b"", b"HTTP/1.1 408 Request Timeout"}, answers[:3]


def test_one_address_holds_at_most_its_cap_of_connections(tmp_path: Path):
    from tests.integration.tenancy.conftest import start_server

    srv = start_server(
        tmp_path, PIER_HTTP_MAX_CONNECTIONS_PER_ADDRESS="20", PIER_HTTP_HEADER_TIMEOUT_SEC="30"
    )
    try:
        held = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(20)]
        time.sleep(0.5)  # all accepted
        over = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        assert over.recv(4096).startswith(b"HTTP/1.1 429"), "the 21st connection was not refused"
        over.close()
        # Another address is not counted against this one.
        assert _head_answer(srv.port, b"GET /health HTTP/1.1\r\nHost: pier\r\n\r\n", source="127.0.0.2") == (
            b"HTTP/1.1 200 OK"
        )
        held.pop().close()
        time.sleep(0.5)
        assert _head_answer(srv.port, b"GET /health HTTP/1.1\r\nHost: pier\r\n\r\n") == b"HTTP/1.1 200 OK"
        for sock in held:
            sock.close()
    finally:
        srv.stop()
