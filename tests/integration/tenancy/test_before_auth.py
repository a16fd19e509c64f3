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
