"""Webhook delivery against real receivers on 127.0.0.1: durable (a receiver
down for a while, a sender restarted), one delivery id, never two attempts at
once, and one collection's hung receiver does not hold up another's."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from pier.db import Store
from pier.db.deliveries import DELIVERED, FAILED
from pier.outbound import OutboundPolicy, allowing
from pier.policies.webhooks import (
    ID_HEADER,
    SIGNATURE_HEADER,
    STANDARD_SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    Delivery,
    SenderConfig,
    WebhookSender,
    delivery_id,
    sign,
    verify,
)
from pier.vault import Vault

# The receivers below listen on loopback, which the operator must allow.
LOOPBACK = allowing(["127.0.0.1"])


def test_signature_is_hmac_of_timestamp_and_body():
    header = sign("s3cret", 1700000000, b'{"a":1}')
    assert header == "t=1700000000,v1=" + hmac.new(b"s3cret", b'1700000000.{"a":1}', "sha256").hexdigest()
    assert verify("s3cret", header, b'{"a":1}', now=1700000010)
    assert not verify("s3cret", header, b'{"a":2}', now=1700000010)
    assert not verify("other", header, b'{"a":1}', now=1700000010)
    assert not verify("s3cret", header, b'{"a":1}', now=1700000000 + 3600)  # too old: a replay
    assert not verify("s3cret", "garbage", b"")


@dataclass
class Seen:
    started: float
    ended: float
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A real HTTP receiver that records every POST (start, end, headers); what
    it answers is `answer(n)` for the n-th request: (delay, status)."""

    answer: Callable[[int], tuple[float, int]] = lambda _n: (0.0, 200)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0
    server: ThreadingHTTPServer | None = None

    def start(self, port: int = 0) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                started = time.monotonic()
                body = self.rfile.read(int(self.headers["Content-Length"]))
                delay, status = receiver.answer(len(receiver.seen))
                time.sleep(delay)
                receiver.seen.append(Seen(started, time.monotonic(), dict(self.headers), body))
                try:
                    self.send_response(status)
                    self.end_headers()
                except OSError:
                    pass  # the sender stopped waiting

            def log_message(self, *_args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'pier.db'}") as opened:
        yield opened


@pytest.fixture
def vault() -> Vault:
    return Vault(Fernet.generate_key())


def sender(store: Store, vault: Vault, **config: float) -> WebhookSender:
    made = WebhookSender(
        store, vault, SenderConfig(**{"backoff_sec": 0.1, "window_sec": 60, **config}), LOOPBACK
    )
    made.start()
    return made


def wait_until(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def no_overlap(seen: list[Seen]) -> bool:
    ordered = sorted(seen, key=lambda s: s.started)
    return all(later.started >= earlier.ended for earlier, later in itertools.pairwise(ordered))


def test_a_receiver_down_for_a_while_gets_the_delivery_once_it_is_up(store: Store, vault: Vault):
    """Down for 8 s: the old sender (6 attempts from 0.1 s, doubling) gave up
    after 3.1 s; a delivery now lasts its window."""
    port = closed_port()
    sending = sender(store, vault)
    receiver = Receiver()
    try:
        sending.send(Delivery(f"http://127.0.0.1:{port}/hook", "k", b'{"run": 1}', "run-1", "a"))
        time.sleep(8)
        assert (stored := store.delivery(delivery_id("run-1"))) is not None and stored.attempts >= 4
        receiver.start(port)
        assert wait_until(lambda: receiver.seen, 20), "the receiver never got its delivery"
        assert wait_until(lambda: store.delivery(delivery_id("run-1")).state == DELIVERED, 5)
    finally:
        sending.close()
        receiver.stop()
    assert len(receiver.seen) == 1
    headers = receiver.seen[0].headers
    assert headers[ID_HEADER] == "msg_run-1"
    assert verify("k", headers[SIGNATURE_HEADER], receiver.seen[0].body)


def test_standard_webhooks_signature_verifies_as_the_spec_says(store: Store, vault: Vault):
    """Recomputed here from the Standard Webhooks definition: base64 of
    HMAC-SHA256 over "<id>.<timestamp>.<body>", keyed by the whsec_ secret's bytes."""
    key = b"0123456789abcdef0123456789abcdef"
    secret = "whsec_" + base64.b64encode(key).decode()
    receiver = Receiver().start()
    sending = sender(store, vault)
    try:
        sending.send(Delivery(receiver.url, secret, b'{"run": 2}', "run-2", "a"))
        assert wait_until(lambda: receiver.seen, 10)
    finally:
        sending.close()
        receiver.stop()
    headers = receiver.seen[0].headers
    signed = f"{headers[ID_HEADER]}.{headers[TIMESTAMP_HEADER]}.".encode() + receiver.seen[0].body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    assert headers[STANDARD_SIGNATURE_HEADER] == f"v1,{expected}"
    assert abs(int(headers[TIMESTAMP_HEADER]) - time.time()) < 60


def test_a_slow_receiver_is_never_posted_to_while_it_still_works_on_one(store: Store, vault: Vault):
    """It answers after 1.5 s, past the 1 s timeout: the next attempt waits for
    it and waits longer, so it gets 2 POSTs (one id) that never overlap."""
    receiver = Receiver(answer=lambda _n: (1.5, 200)).start()
    sending = sender(store, vault, attempt_timeout_sec=1.0)
    try:
        sending.send(Delivery(receiver.url, None, b"{}", "run-3", "a"))
        assert wait_until(lambda: store.delivery(delivery_id("run-3")).state == DELIVERED, 20)
        time.sleep(1)  # any further attempt would show now
    finally:
        sending.close()
        receiver.stop()
    assert len(receiver.seen) == 2, [s.started for s in receiver.seen]
    assert {s.headers[ID_HEADER] for s in receiver.seen} == {"msg_run-3"}
    assert no_overlap(receiver.seen)


def test_a_delivery_survives_a_restart_of_its_sender(store: Store, vault: Vault):
    receiver = Receiver(answer=lambda n: (0.0, 503 if n < 2 else 200)).start()
    first = sender(store, vault, backoff_sec=0.5)
    try:
        first.send(Delivery(receiver.url, "secret-four", b'{"run": 4}', "run-4", "a"))
        assert wait_until(lambda: len(receiver.seen) >= 1, 10)
        first.close()  # the server stops before the receiver took it
        assert store.delivery(delivery_id("run-4")).state == "pending"
        second = sender(store, vault, backoff_sec=0.5)
        try:
            assert wait_until(lambda: store.delivery(delivery_id("run-4")).state == DELIVERED, 20)
        finally:
            second.close()
    finally:
        receiver.stop()
    assert [s.headers[ID_HEADER] for s in receiver.seen] == ["msg_run-4"] * 3
    # the secret is kept sealed in the database, and opened for each attempt
    sealed = store.delivery(delivery_id("run-4")).sealed_secret
    assert sealed is not None and "secret-four" not in sealed and vault.decrypt(sealed) == "secret-four"
    assert all(verify("secret-four", s.headers[SIGNATURE_HEADER], s.body) for s in receiver.seen)


def test_a_delivery_stored_twice_is_sent_once(store: Store, vault: Vault):
    """A retried fleet activity or a restarted server stores a run's end again."""
    receiver = Receiver().start()
    sending = sender(store, vault)
    try:
        for _ in range(3):
            sending.send(Delivery(receiver.url, None, b"{}", "run-5", "a"))
        assert wait_until(lambda: receiver.seen, 10)
        time.sleep(1.5)
    finally:
        sending.close()
        receiver.stop()
    assert len(receiver.seen) == 1


def test_a_hung_receiver_delays_only_its_own_collection(store: Store, vault: Vault):
    hung = Receiver(answer=lambda _n: (30.0, 200)).start()
    fine = Receiver().start()
    sending = sender(store, vault, attempt_timeout_sec=20.0, lane=2)
    try:
        for number in range(6):
            sending.send(Delivery(hung.url, None, b"{}", f"abuser-{number}", "abuser"))
        assert wait_until(lambda: len(sending._open) >= 2, 5)  # its lane is full, hanging
        sent = time.monotonic()
        sending.send(Delivery(fine.url, None, b"{}", "fine-1", "fine"))
        assert wait_until(lambda: fine.seen, 10)
        waited = time.monotonic() - sent
    finally:
        sending.close()
        hung.stop()
        fine.stop()
    assert waited < 2.0, f"the other collection's webhook waited {waited:.1f}s"


def test_a_delivery_gives_up_when_its_window_closes(store: Store, vault: Vault):
    sending = sender(store, vault, window_sec=1.0)
    try:
        sending.send(Delivery(f"http://127.0.0.1:{closed_port()}/", None, b"{}", "run-6", "a"))
        assert wait_until(lambda: store.delivery(delivery_id("run-6")).state == FAILED, 10)
    finally:
        sending.close()
    assert "ConnectError" in (store.delivery(delivery_id("run-6")).last_error or "")


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
    from pier.policies.webhooks import new_client, post

    server = counting_receiver()
    port = server.server_address[1]
    rebinding = OutboundPolicy(resolver=lambda host, p: ["127.0.0.1"])
    try:
        with new_client(rebinding) as client:
            for url in (f"http://rebind.example:{port}/", f"http://127.0.0.1:{port}/"):
                outcome = post(client, Delivery(url, None, b"{}", "r"), 5)
                assert outcome.problem is not None and "is not an allowed destination" in outcome.problem
    finally:
        server.shutdown()
    assert Counter.hits == 0


def test_the_sender_connects_to_the_checked_address_keeping_the_host_header():
    from pier.policies.webhooks import new_client, post

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
            assert (
                post(client, Delivery(f"http://hooks.example:{port}/x", None, b"{}", "r"), 5).problem is None
            )
    finally:
        server.shutdown()
    assert seen == [f"hooks.example:{port}"]
