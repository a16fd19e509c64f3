"""The HTTP protocol pier's own servers run under (`pier serve`, the model
gateway): uvicorn's httptools protocol, with the bounds it lacks on its own,
so that a caller without a token costs a small, bounded amount.

- Time. uvicorn closes a connection idle between requests (its keep-alive
  timeout), but waits for ever for a request's head or the rest of its body,
  and for a first byte: a client that opens connections and sends nothing,
  or a byte now and then (slow loris), holds them all. Here a connection's
  first request's line and headers must arrive within `header_timeout_sec` of
  the connection (a later request's, of its first byte), and a body may not
  pause longer than `body_idle_sec` between two pieces; either way the
  connection is answered 408 and closed.
- Size. llhttp (under httptools) has no limit on a request's head, and
  httptools keeps a header's pieces until it ends: one 40 MiB header was
  40 MiB of the server's memory, before authentication. Here a request line
  longer than `max_line_bytes` is answered 414, a header line longer than
  that or a head (request line and headers) longer than `max_head_bytes` 431,
  and the connection is closed at once: nothing more of it is read. What is
  held for a head is at most `max_head_bytes` and one read.
- Connections. One client address holds at most `max_connections_per_address`
  connections at once; one more is answered 429 and closed.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

TIMEOUT_ANSWER = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


def _answer(status: str, text: str) -> bytes:
    body = text.encode()
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


class HeadTooLarge(Exception):
    """Raised in a parser callback: llhttp stops at once and uvicorn answers
    (through send_400_response, here the refusal below)."""


class BoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with deadlines and size bounds while a
    request arrives, and a cap on connections per client address."""

    header_timeout_sec = 10.0
    body_idle_sec = 30.0
    max_head_bytes = 32 << 10
    max_line_bytes = 8 << 10
    max_connections_per_address = 256
    # One per server class (bounded_protocol makes one per server): the
    # connections each client address holds now.
    per_address: Counter[str] = Counter()

    _deadline: asyncio.TimerHandle | None = None
    _address: str | None = None
    _in_head = True  # between a message's first byte (or the connection) and its headers' end
    _head_bytes = 0  # the request line and the complete header lines so far
    _chunks_bytes = 0  # reads that were all head, the current header's pieces among them
    _refusal: bytes | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        address = peer[0] if isinstance(peer, tuple) and peer else None
        if address is not None and self.per_address[address] >= self.max_connections_per_address:
            transport.write(
                _answer(
                    "429 Too Many Requests",
                    f"this address already holds {self.max_connections_per_address} connections "
                    "(PIER_HTTP_MAX_CONNECTIONS_PER_ADDRESS): close some, or reuse them\n",
                )
            )
            transport.close()
            return
        if address is not None:
            self._address = address
            self.per_address[address] += 1
        self._arm(self.header_timeout_sec)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._address is not None:
            self.per_address[self._address] -= 1
            if self.per_address[self._address] <= 0:
                del self.per_address[self._address]
            self._address = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return  # refused or timed out: nothing more of it is read
        whole = self._in_head and self._head_started
        super().data_received(data)
        if whole and self._in_head and not self.transport.is_closing():
            # The whole read was head, and the head is not over: it counts
            # even while httptools still holds a header's pieces unseen.
            self._chunks_bytes += len(data)
            if self._chunks_bytes > self.max_head_bytes:
                self._refuse(self._too_large("the request's headers"))

    _head_started = False

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_started = True
        self._head_bytes = self._chunks_bytes = 0
        self._arm(self.header_timeout_sec)

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > self.max_line_bytes:
            self._refusal = _answer(
                "414 URI Too Long",
                f"the request line is longer than {self.max_line_bytes} bytes (PIER_HTTP_MAX_LINE_BYTES)\n",
            )
            raise HeadTooLarge
        super().on_url(url)
        self._head_bytes += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        line = len(name) + len(value) + 4
        if line > self.max_line_bytes:
            self._refusal = _answer(
                "431 Request Header Fields Too Large",
                f"a header line is longer than {self.max_line_bytes} bytes (PIER_HTTP_MAX_LINE_BYTES)\n",
            )
            raise HeadTooLarge
        self._head_bytes += line
        if self._head_bytes > self.max_head_bytes:
            self._refusal = self._too_large("the request line and headers")
            raise HeadTooLarge
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_started = False
        super().on_headers_complete()
        self._arm(self.body_idle_sec)  # disarmed at once when there is no body

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._arm(self.body_idle_sec)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._disarm()

    def send_400_response(self, msg: str) -> None:
        if self._refusal is None:
            super().send_400_response(msg)
        else:
            self._refuse(self._refusal)

    def _too_large(self, what: str) -> bytes:
        return _answer(
            "431 Request Header Fields Too Large",
            f"{what} are longer than {self.max_head_bytes} bytes (PIER_HTTP_MAX_HEAD_BYTES)\n",
        )

    def _refuse(self, answer: bytes) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(answer)
            self.transport.close()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(TIMEOUT_ANSWER)
        self.transport.close()


def bounded_protocol(**bounds: Any) -> type[BoundedProtocol]:
    """A protocol class for one server: its bounds (the class attributes
    above, by name) and its own count of connections per address."""
    unknown = set(bounds) - set(vars(BoundedProtocol))
    if unknown:
        raise TypeError(f"not a bound of BoundedProtocol: {sorted(unknown)}")
    return type("PierHttpProtocol", (BoundedProtocol,), {**bounds, "per_address": Counter()})
