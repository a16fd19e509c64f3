"""A fleet's webhooks are queued by a Temporal activity into the durable queue
the servers deliver from: a receiver that refuses the first deliveries still
gets the run's record, signed as the in-process sender signs it, even when the
worker that ran the run and the server are both gone by then; the webhook
secret never reaches the workflow's history in clear."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from tests.integration.fleet.test_fleet_fake import setup
from tests.support.fleet import Fleet, history_json, ran_on, wait_for

from pier.policies.webhooks import EVENT_HEADER, SIGNATURE_HEADER, verify

SECRET = "whsec-" + "k" * 26
REFUSED = 2  # deliveries answered 500 before one is accepted


class Receiver(BaseHTTPRequestHandler):
    """Answers 500 to the first `refuse` deliveries, then 200; keeps them all."""

    refuse: ClassVar[int] = REFUSED
    received: ClassVar[list[tuple[int, dict[str, str], bytes]]] = []
    refused_enough: ClassVar[threading.Event] = threading.Event()
    lock: ClassVar[threading.Lock] = threading.Lock()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with Receiver.lock:
            code = 500 if len(Receiver.received) < Receiver.refuse else 200
            Receiver.received.append((code, dict(self.headers), body))
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()
        if len(Receiver.received) == Receiver.refuse:
            Receiver.refused_enough.set()


def receive(refuse: int) -> ThreadingHTTPServer:
    Receiver.refuse, Receiver.received, Receiver.refused_enough = refuse, [], threading.Event()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server

    def log_message(self, *_args) -> None:
        return


def test_the_webhook_is_retried_by_temporal_across_lost_processes(fleet: Fleet) -> None:
    receiver = receive(refuse=REFUSED)
    try:
        collection = setup(fleet, PIER_WEBHOOK_BACKOFF_SEC="2")
        worker = fleet.worker("w1")
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        tid = collection.run("t", init_params={"webhook_url": url, "webhook_secret": SECRET})
        assert collection.wait("t", tid, timeout=90)["status"] == "completed"

        # Refused twice: the process that ran the run and the server go
        # (SIGKILL, mid-retries); a new server takes the delivery over.
        assert Receiver.refused_enough.wait(60), f"{len(Receiver.received)} deliveries"
        worker.kill()
        collection.server.kill()
        fleet.server()
        wait_for(lambda: any(code == 200 for code, _, _ in Receiver.received), 120, "the webhook accepted")
    finally:
        receiver.shutdown()

    codes = [code for code, _, _ in Receiver.received]
    assert codes == [500] * REFUSED + [200], codes
    for _, headers, body in Receiver.received:
        assert headers[EVENT_HEADER] == "run.ended"
        assert verify(SECRET, headers[SIGNATURE_HEADER], body), "each attempt is signed with the secret"
        assert not verify("another-secret", headers[SIGNATURE_HEADER], body)
    store = fleet.store()
    for _, _, body in Receiver.received:
        assert json.loads(body) == json.loads(store.get_run(tid).model_dump_json()), "the body is the record"
    assert ran_on(store, tid) == ["w1"]
    store.close()

    history = history_json(fleet.address, "default", tid)
    assert "pier.webhook" in history and url in history, "the workflow delivered it"
    assert SECRET not in history, "the webhook secret is in Temporal's history in clear"


def test_a_cancelled_run_gets_its_webhook_too(fleet: Fleet) -> None:
    """Cancelling ends the workflow by a cancellation: the webhook is sent all the same."""
    receiver = receive(refuse=0)
    try:
        collection = setup(fleet, PIER_TEST_AGENT_SEC="120")
        fleet.worker("w1")
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        tid = collection.run("t", init_params={"webhook_url": url, "webhook_secret": SECRET})
        store = fleet.store()
        wait_for(lambda: store.get_run(tid).stage("run_agent").status == "running", 60, "the agent started")
        with collection.client() as c:
            r = c.post(f"/api/v1/trajectory/{collection.name}/t/statuses", json={tid: "cancelled"})
        assert r.status_code == 200, r.text
        wait_for(lambda: Receiver.received, 60, "the webhook of the cancelled run")
    finally:
        receiver.shutdown()
    [(_code, headers, body)] = Receiver.received
    assert verify(SECRET, headers[SIGNATURE_HEADER], body)
    sent = json.loads(body)
    assert sent["trajectory_id"] == tid and sent["status"] == "cancelled", sent
    assert sent == json.loads(store.get_run(tid).model_dump_json())
    store.close()
