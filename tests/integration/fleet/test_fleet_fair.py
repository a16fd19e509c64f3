"""Fair order in the fleet: one collection's backlog does not hold another
collection's next run behind all of it. The runs' workflows carry their
collection as Temporal's fairness key, and a Temporal server with fairness on
(as docs/fleet.md says to run it; here a dev server of the test's own) hands
the backlog's claims out in turn per collection."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from tests.integration.fleet.conftest import fleet_on
from tests.support.api_server import make_collection
from tests.support.fleet import FAKE_BACKEND, Fleet, wait_for
from tests.support.private import Temporal

from pier.record import RunStatus

pytestmark = pytest.mark.integration

BACKLOG = 16  # the busy collection's runs, queued before the other's one
AGENT_SEC = "1.0"  # each run holds the only slot this long
# The other collection's run may wait for what is running and what its worker
# already claimed, plus one turn of the busy collection's: at most this many of
# the busy collection's runs end before it (first come, first served: all of them).
AHEAD_AT_MOST = 4


@pytest.fixture
def fair_fleet(tmp_path) -> Iterator[Fleet]:
    temporal = Temporal.create()  # with fairness on (tests/support/private.py)
    try:
        with fleet_on(tmp_path, temporal.address) as fleet:
            yield fleet
    finally:
        temporal.destroy()


def test_a_collections_backlog_does_not_hold_anothers_next_run_behind_it(fair_fleet: Fleet) -> None:
    fair_fleet.settings.update(
        {"PIER_SANDBOX_BACKEND": FAKE_BACKEND, "PIER_TEST_AGENT_SEC": AGENT_SEC, "PIER_WORKER_SLOTS": "1"}
    )
    server = fair_fleet.server()
    busy = make_collection(server, "pier-fake:latest", prefix=f"busy-{uuid.uuid4().hex[:4]}")
    other = make_collection(server, "pier-fake:latest", prefix=f"other-{uuid.uuid4().hex[:4]}")
    for collection in (busy, other):
        collection.put_task("t", "echo hi")
    backlog = [busy.run("t") for _ in range(BACKLOG)]  # queued before any worker polls
    mine = other.run("t")
    fair_fleet.worker("w1")
    store = fair_fleet.store()
    try:

        def ended() -> dict | None:
            runs = {tid: store.get_run(tid) for tid in [*backlog, mine]}
            return runs if all(run.status.terminal for run in runs.values()) else None

        runs = wait_for(ended, 60 + BACKLOG * 10, "every run ended", interval=0.5)
    finally:
        store.close()
    assert all(run.status == RunStatus.completed for run in runs.values()), {
        tid: run.error for tid, run in runs.items() if run.status != RunStatus.completed
    }
    ahead = sum(1 for tid in backlog if runs[tid].ended < runs[mine].ended)
    assert ahead <= AHEAD_AT_MOST, (
        f"{ahead} of the busy collection's {BACKLOG} queued runs ended before the other collection's "
        f"one run (at most {AHEAD_AT_MOST} when the queue serves collections in turn)"
    )
