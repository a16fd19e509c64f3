"""The model gateway listens where sandboxes (hostile) reach it: its server has
the same bounds before authentication as pier serve's (pier.serving)."""

from __future__ import annotations

import socket

import httpx
import pytest

from pier.gateway.server import Gateway


@pytest.fixture
def gateway():
    made = Gateway("127.0.0.1", transport=httpx.MockTransport(lambda r: httpx.Response(200))).start()
    yield made
    made.stop()


def test_a_huge_header_is_refused_431_and_the_rest_is_not_read(gateway: Gateway):
    """Before: uvicorn's defaults, no header limit: a sandbox's 40 MiB header was read whole."""
    sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=10)
    sock.sendall(b"POST /anthropic/v1/messages HTTP/1.1\r\nHost: g\r\nX-Big: ")
    sent = 0
    try:
        while sent < 40 << 20:
            sock.sendall(b"a" * (1 << 16))
            sent += 1 << 16
    except OSError:
        pass  # closed by the gateway
    answer = sock.recv(4096)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 431"), answer[:100]
    assert sent < 8 << 20, f"the gateway read {sent >> 20} MB of one header"
