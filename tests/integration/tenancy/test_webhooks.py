"""Webhooks from a real `pier serve` to real receivers: one down for longer
than the old sender tried (and the server restarted meanwhile), one that
answers after 12 s when an attempt waits 10 s. Each gets its delivery, with
one webhook-id, and never two attempts at once."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tests.integration.tenancy.conftest import start_server
from tests.support.api_server import make_collection
from tests.support.tenancy import CountingReceiver

pytestmark = pytest.mark.integration


class SlowReceiver(CountingReceiver):
    """Takes 12 s to answer each POST; keeps when each started and ended."""

    def start(self) -> SlowReceiver:
        spans: list[tuple[float, float, str]] = []
        self.spans = spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                started = time.monotonic()
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                time.sleep(12)
                spans.append((started, time.monotonic(), self.headers.get("webhook-id", "")))
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender gave up on this attempt

            def log_message(self, *_args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_deliveries_outlast_a_down_receiver_a_restart_and_a_slow_receiver(tmp_path):
    """Before: the receiver down 60 s never got its delivery (6 attempts, given
    up 31 s after the run; with a 0.2 s first wait, 6 s), and the one answering
    after 12 s got 5 POSTs, overlapping."""
    # the receivers listen on loopback, which the operator must allow
    server = start_server(tmp_path, PIER_WEBHOOK_BACKOFF_SEC="0.1", PIER_OUTBOUND_ALLOW="127.0.0.1")
    slow = SlowReceiver().start()
    later = CountingReceiver()
    port = closed_port()
    try:
        collection = make_collection(server, "pier-fake:latest", prefix="hooks")
        collection.put_task("t", "echo hi")
        down_run = collection.run("t", init_params={"webhook_url": f"http://127.0.0.1:{port}/hook"})
        slow_run = collection.run("t", init_params={"webhook_url": slow.url})
        for tid in (down_run, slow_run):
            assert collection.wait("t", tid, timeout=60)["status"] == "completed"
        time.sleep(5)  # the old sender has given up by now
        server.stop()  # and the server restarts while the receiver is down
        server.start(server.port)
        time.sleep(2)
        later.start_on(port)
        # the next attempt comes within the time the receiver was down (the wait doubles)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (later.got and len(slow.spans) >= 2):
            time.sleep(0.2)
    finally:
        server.stop()
        slow.stop()
        later.stop()
    log = "\n".join(line for line in server.log_tail(400).splitlines() if "webhook" in line)[-3000:]
    assert [d.delivery_id for d in later.got] == [f"msg_{down_run}"], log
    assert len(slow.spans) == 2, slow.spans
    assert {span[2] for span in slow.spans} == {f"msg_{slow_run}"}
    ordered = sorted(slow.spans)
    assert all(b[0] >= a[1] for a, b in itertools.pairwise(ordered)), "two attempts were open at once"
