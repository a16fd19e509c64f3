"""Two collections on one real `pier serve`, one abusive: a webhook receiver
that never answers, 200 runs at once, 400 live log streams, uploads past its
quota. The other's API stays quick, its next run starts within one slot's
wait and its webhook arrives on time; the abuser gets 429s with Retry-After."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.integration.tenancy.conftest import start_server
from tests.support.api_server import ADMIN_TOKEN, Server, make_collection
from tests.support.tenancy import (
    CountingReceiver,
    HangingReceiver,
    ended_at,
    flood_runs,
    latencies_ms,
    open_streams,
    p50_p95,
    start_wait_sec,
)

pytestmark = pytest.mark.integration

AGENT_SEC = 1.0
QUEUED = 30  # the abuser's queued_runs quota, set by the admin
STREAMS = 20  # the server's default streams_per_token


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(
        tmp_path_factory.mktemp("abuse"),
        PIER_OUTBOUND_ALLOW="127.0.0.1",  # the webhook receivers listen on loopback
        PIER_MAX_CONCURRENT_RUNS="2",
        PIER_TEST_AGENT_SEC=str(AGENT_SEC),
        PIER_QUOTA_STREAMS_PER_TOKEN=str(STREAMS),
        PIER_QUOTA_UPLOAD_BYTES=str(3 << 20),
        PIER_WEBHOOK_ATTEMPT_TIMEOUT_SEC="5",
    )
    yield srv
    srv.stop()


def test_an_abusive_collection_slows_no_other(server: Server):
    good = make_collection(server, "pier-fake:latest", prefix="good")
    abuser = make_collection(server, "pier-fake:latest", prefix="abuser")
    for collection in (good, abuser):
        collection.put_task("t", "echo hi")
    with server.client(ADMIN_TOKEN) as admin:
        r = admin.put(f"/api/v1/collections/{abuser.name}/quotas", json={"queued_runs": QUEUED})
        assert r.status_code == 200 and r.json()["quotas"]["queued_runs"] == QUEUED, r.text
    with abuser.client() as c:
        shown = c.get(f"/api/v1/collections/{abuser.name}/quotas").json()
    assert shown["quotas"]["queued_runs"] == QUEUED and shown["quotas"]["streams_per_token"] == STREAMS

    hanging, receiver = HangingReceiver(), CountingReceiver().start()
    held = []
    try:
        # 200 runs at once, each with a webhook to a receiver that never answers
        answers = flood_runs(abuser, "t", 200, init_params={"webhook_url": hanging.url})
        accepted = [r for r in answers if r.status_code == 200]
        refused = [r for r in answers if r.status_code == 429]
        assert len(accepted) + len(refused) == 200, {r.status_code for r in answers}
        # the queue holds QUEUED; what started during the flood made room for as many more
        waiting = [
            r for r in accepted if abuser.record("t", r.json()["trajectory_id"])["status"] == "pending"
        ]
        assert len(waiting) <= QUEUED and QUEUED <= len(accepted) < 100, (len(waiting), len(accepted))
        assert all(int(r.headers["Retry-After"]) > 0 and "queued_runs" in r.text for r in refused)

        # 400 live log streams from one token, on its last (long-waiting) run
        last = accepted[-1].json()["trajectory_id"]
        held, statuses = open_streams(server, abuser.token, last, 400)
        assert len(held) == STREAMS, statuses[:3]
        assert statuses.count(b"HTTP/1.1 429 Too Many Requests") == 400 - STREAMS

        # uploads past its quota (3 MB)
        with abuser.client() as c:
            first = c.post("/api/v1/sandbox/upload", files={"files": ("a.bin", b"a" * (2 << 20))})
            second = c.post("/api/v1/sandbox/upload", files={"files": ("b.bin", b"b" * (2 << 20))})
        assert first.status_code == 200, first.text
        assert second.status_code == 429 and "upload_bytes" in second.text, second.text
        assert int(second.headers["Retry-After"]) > 0

        # the other collection, meanwhile
        p50, p95 = p50_p95(latencies_ms(good, 40))
        tid = good.run("t", init_params={"webhook_url": receiver.url})
        record = good.wait("t", tid, timeout=60)
        abusers_run = abuser.wait("t", accepted[0].json()["trajectory_id"], timeout=60)
    finally:
        for sock in held:
            sock.close()
        receiver.stop()
    try:
        assert p95 < 100, f"the other collection's API p95 is {p95:.0f} ms (p50 {p50:.0f} ms)"
        assert record["status"] == "completed", record.get("error")
        slot = abusers_run["duration_seconds"] or AGENT_SEC
        waited = start_wait_sec(record)
        assert waited <= slot + 1.0, (
            f"its run waited {waited:.1f}s for a slot; one slot's wait is {slot:.1f}s"
        )
        [delivered] = receiver.got
        late = delivered.at - ended_at(record)
        assert late < 3.0, f"its webhook came {late:.1f}s after the run ended"
        assert delivered.delivery_id == f"msg_{tid}"
        assert hanging.connections >= 1, "the abuser's webhooks were attempted (and hung)"
    finally:
        hanging.stop()
