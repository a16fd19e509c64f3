from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

from pier.lifecycle.webhooks import SIGNATURE_HEADER, Delivery, WebhookSender, sign, verify
from pier.outbound import allowing

# The receivers below listen on loopback, which the operator must allow.
LOOPBACK = allowing(["127.0.0.1"])


def test_signature_is_hmac_of_timestamp_and_body():
    header = sign("s3cret", 1700000000, b'{"a":1}')
    assert (
        header
        == "t=1700000000,v1=" + __import__("hmac").new(b"s3cret", b'1700000000.{"a":1}', "sha256").hexdigest()
    )
    assert verify("s3cret", header, b'{"a":1}', now=1700000010)
    assert not verify("s3cret", header, b'{"a":2}', now=1700000010)
    assert not verify("other", header, b'{"a":1}', now=1700000010)
    assert not verify("s3cret", header, b'{"a":1}', now=1700000000 + 3600)  # too old: a replay
    assert not verify("s3cret", "garbage", b"")


class Request(NamedTuple):
    at: float
    signature: str
    body: bytes
    released: bool  # whether the test let the receiver answer (False: it waited in vain)


def test_delivery_is_signed_retried_with_backoff_until_accepted_and_never_blocks_send():
    """The receiver only records; every assertion runs here, in the test's thread
    (an assertion in the handler's thread would be swallowed by the server)."""
    requests: list[Request] = []
    third = threading.Event()
    answer = threading.Event()  # set once send() has returned

    class Flaky(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            released = answer.wait(10)
            requests.append(Request(time.monotonic(), self.headers.get(SIGNATURE_HEADER, ""), body, released))
            self.send_response(200 if len(requests) >= 3 else 503)
            self.end_headers()
            if len(requests) >= 3:
                third.set()

        def log_message(self, *_):
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sender = WebhookSender(attempts=5, backoff_sec=0.05, policy=LOOPBACK)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        sender.send(Delivery(url, "k", b'{"run": 1}', "run-1"))
        answer.set()  # a send() that waited for the receiver would have left it waiting 10 s
        assert third.wait(30), f"{len(requests)} deliveries"
    finally:
        sender.close(wait=True)
        server.shutdown()
    assert len(requests) == 3
    assert all(r.released for r in requests), "send() blocked until the receiver answered"
    assert all(r.body == b'{"run": 1}' and verify("k", r.signature, r.body) for r in requests)
    assert not verify("other", requests[0].signature, requests[0].body)
    first, second = requests[1].at - requests[0].at, requests[2].at - requests[1].at
    assert first >= 0.05 and second >= 0.1, (first, second)  # the delay doubles


def test_delivery_gives_up_after_its_attempts():
    sender = WebhookSender(attempts=2, backoff_sec=0, policy=LOOPBACK)
    try:
        assert sender._deliver(Delivery("http://127.0.0.1:9/", None, b"{}", "r")) is False
    finally:
        sender.close()


class Counter(BaseHTTPRequestHandler):
    hits = 0

    def do_POST(self):
        Counter.hits += 1
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_):
        return


def counting_receiver() -> ThreadingHTTPServer:
    Counter.hits = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Counter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_sender_refuses_a_local_receiver_at_connect_time_without_connecting():
    """A name that passed accept and now resolves to loopback (DNS rebinding), and
    loopback itself: refused before a connection, saying only 'not allowed'."""
    from pier.lifecycle.webhooks import new_client, post
    from pier.outbound import OutboundPolicy

    server = counting_receiver()
    port = server.server_address[1]
    rebinding = OutboundPolicy(resolver=lambda host, p: ["127.0.0.1"])
    try:
        with new_client(rebinding) as client:
            for url in (f"http://rebind.example:{port}/", f"http://127.0.0.1:{port}/"):
                problem = post(client, Delivery(url, None, b"{}", "r"))
                assert problem is not None and "is not an allowed destination" in problem
    finally:
        server.shutdown()
    assert Counter.hits == 0


def test_the_sender_connects_to_the_checked_address_keeping_the_host_header():
    from pier.lifecycle.webhooks import new_client, post

    seen: list[str] = []

    class Host(Counter):
        def do_POST(self):
            seen.append(self.headers["Host"])
            super().do_POST()

    Counter.hits = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Host)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    policy = allowing([f"127.0.0.1:{port}"], resolver=lambda host, p: ["127.0.0.1"])
    try:
        with new_client(policy) as client:
            assert post(client, Delivery(f"http://hooks.example:{port}/x", None, b"{}", "r")) is None
    finally:
        server.shutdown()
    assert seen == [f"hooks.example:{port}"]
