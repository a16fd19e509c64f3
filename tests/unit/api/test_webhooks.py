from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pier.api.webhooks import SIGNATURE_HEADER, Delivery, WebhookSender, sign, verify


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


def test_delivery_retries_with_backoff_until_accepted():
    seen: list[float] = []

    class Flaky(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(time.monotonic())
            assert self.headers[SIGNATURE_HEADER].startswith("t=")
            self.send_response(200 if len(seen) >= 3 else 503)
            self.end_headers()

        def log_message(self, *_):
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sender = WebhookSender(attempts=5, backoff_sec=0.05)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        began = time.monotonic()
        sender.send(Delivery(url, "k", b"{}", "run-1"))
        assert time.monotonic() - began < 0.05, "send must not block"
        deadline = time.monotonic() + 5
        while len(seen) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sender.close(wait=True)
        server.shutdown()
    assert len(seen) == 3
    assert seen[2] - seen[1] >= seen[1] - seen[0] >= 0.05  # the delay doubles


def test_delivery_gives_up_after_its_attempts():
    sender = WebhookSender(attempts=2, backoff_sec=0)
    try:
        assert sender._deliver(Delivery("http://127.0.0.1:9/", None, b"{}", "r")) is False
    finally:
        sender.close()
