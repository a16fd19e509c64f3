from __future__ import annotations

import threading

import pytest

from pier.db import Store
from pier.db.requests import QueueFull
from pier.errors import InputError
from pier.record import RunStatus, Trajectory


def test_enqueue_keeps_record_and_request_together(store: Store) -> None:
    record = Trajectory.new("r1", "c", "t")
    store.enqueue_run(record, {"task": {"init_params": {}}, "run_params": {"vars": {"a": "1"}}})
    assert store.get_run("r1").status == "pending"
    assert store.run_request("r1") == {"task": {"init_params": {}}, "run_params": {"vars": {"a": "1"}}}
    assert set(store.run_requests()) == {"r1"}
    store.drop_run_request("r1")
    store.drop_run_request("r1")
    assert store.run_request("r1") is None and store.run_requests() == {}


def test_enqueue_twice_is_refused_and_leaves_no_orphan_request(store: Store) -> None:
    store.create_run(Trajectory.new("r2", "c", "t"))
    with pytest.raises(InputError, match="already exists"):
        store.enqueue_run(Trajectory.new("r2", "c", "t"), {"x": 1})
    assert store.run_request("r2") is None


def test_max_pending_is_counted_with_the_insert(store_url: str) -> None:
    """Twelve enqueues at once from separate stores (as from separate servers)
    against room for three: exactly three are stored."""
    stores = [Store.open(store_url) for _ in range(12)]
    barrier = threading.Barrier(len(stores))
    outcomes: list[str] = []

    def enqueue(one: Store, n: int) -> None:
        barrier.wait()
        try:
            outcomes.append(one.enqueue_run(Trajectory.new(f"q{n}", "c", "t"), {}, max_pending=3))
        except QueueFull as full:
            outcomes.append(f"full at {full.waiting}")

    threads = [threading.Thread(target=enqueue, args=(one, n)) for n, one in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for one in stores:
        one.close()
    with Store.open(store_url) as store:
        assert store.count_runs("c", [RunStatus.pending]) == 3
        assert store.run_requests().keys() == {o for o in outcomes if not o.startswith("full")}
    assert sorted(outcomes).count("full at 3") == 9, outcomes


def test_a_full_queue_still_returns_the_run_of_a_retried_key(store: Store) -> None:
    first = Trajectory.new("k1", "c", "t")
    assert store.enqueue_run(first, {}, key="same", max_pending=1) == "k1"
    assert store.enqueue_run(Trajectory.new("k2", "c", "t"), {}, key="same", max_pending=1) == "k1"
    with pytest.raises(QueueFull):
        store.enqueue_run(Trajectory.new("k3", "c", "t"), {}, key="other", max_pending=1)
    store.enqueue_run(Trajectory.new("k4", "d", "t"), {}, max_pending=1)  # another collection's queue
