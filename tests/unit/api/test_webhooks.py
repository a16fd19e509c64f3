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
