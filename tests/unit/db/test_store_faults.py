"""The store's side of faults: a run's writes ride out a database that does
not answer (pier.db.retry), a client's idempotency key names one run, and a
run refused at submit leaves nothing behind."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from pier.db import Store
from pier.db.retry import RetryingStore, retried
from pier.errors import NotFoundError
from pier.record import Trajectory


def dropped() -> OperationalError:
    return OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly"))


def test_a_transient_failure_is_tried_again_until_it_succeeds(monkeypatch) -> None:
    monkeypatch.setattr("pier.db.retry.FIRST_WAIT_SEC", 0.01)
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise dropped()
        return "written"

    assert retried(flaky, budget_sec=5, what="save_run") == "written"
    assert len(calls) == 3


def test_past_the_budget_the_drivers_error_is_raised(monkeypatch) -> None:
    monkeypatch.setattr("pier.db.retry.FIRST_WAIT_SEC", 0.01)

    def down() -> None:
        raise dropped()

    with pytest.raises(OperationalError):
        retried(down, budget_sec=0.05, what="save_run")


def test_the_callers_errors_are_not_retried() -> None:
    calls = []

    def missing() -> None:
        calls.append(1)
        raise NotFoundError("run 'x' not found")

    def duplicate() -> None:
        calls.append(2)
        raise IntegrityError("INSERT", {}, Exception("duplicate key"))

    with pytest.raises(NotFoundError):
        retried(missing, budget_sec=5, what="get_run")
    with pytest.raises(IntegrityError):
        retried(duplicate, budget_sec=5, what="create_run")
    assert calls == [1, 2], "each was tried once"


def test_a_retrying_store_is_the_store_for_reads_and_writes(store: Store) -> None:
    record = Trajectory.new("a" * 32, "c", "t")
    retrying = RetryingStore(store, budget_sec=1)
    retrying.create_run(record)
    assert retrying.get_run(record.trajectory_id).trajectory_id == record.trajectory_id
    assert retrying.plain is store


def test_an_idempotency_key_names_one_run_per_collection(store: Store) -> None:
    first, second = Trajectory.new("a" * 32, "c", "t"), Trajectory.new("b" * 32, "c", "t")
    assert store.enqueue_run(first, {"x": 1}, key="k1") == first.trajectory_id
    assert store.enqueue_run(second, {"x": 2}, key="k1") == first.trajectory_id, "the key's run comes back"
    with pytest.raises(NotFoundError):
        store.get_run(second.trajectory_id)
    other = Trajectory.new("c" * 32, "d", "t")
    assert store.enqueue_run(other, {}, key="k1") == other.trajectory_id, "keys are per collection"
    assert store.run_for_key("c", "k1") == first.trajectory_id


def test_a_dropped_run_leaves_nothing(store: Store) -> None:
    record = Trajectory.new("a" * 32, "c", "t")
    store.enqueue_run(record, {"x": 1}, key="k")
    store.append_event(record.trajectory_id, "line")
    store.drop_run(record.trajectory_id)
    with pytest.raises(NotFoundError):
        store.get_run(record.trajectory_id)
    assert store.run_request(record.trajectory_id) is None
    assert store.run_for_key("c", "k") is None
    assert store.events(record.trajectory_id) == []
