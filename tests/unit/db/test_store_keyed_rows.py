"""The stores whose rows get their id from the database (routines, experiment
attempts, audit entries, tokens) or are claimed with a conditional write
(webhook deliveries, experiment leases), on SQLite and PostgreSQL: a new row
comes back as the database stored it, and a second claim loses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pier.db import AuditEntry, Store
from pier.db.deliveries import DELIVERED, PENDING, StoredDelivery
from pier.db.routines import RoutineExists
from pier.errors import NotFoundError
from pier.record import Trajectory

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _routine(store: Store, name: str, **changes: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "collection": "c", "task": "t", "name": name, "description": None, "cron_expression": "0 * * * *",
        "timezone": "UTC", "init_params": {"vars": {"n": 1}}, "enabled": True, "next_run_at": T0,
        "run_now_at": None, "last_run_at": None, "last_trajectory_id": None,
    }  # fmt: skip
    return {**fields, **changes}


def test_a_routine_comes_back_as_stored_and_its_tick_is_claimed_once(store: Store) -> None:
    created = store.create_routine(**_routine(store, "hourly"))
    assert created.id > 0
    assert (created.init_params, created.enabled, created.next_run_at) == ({"vars": {"n": 1}}, True, T0)
    assert created.created_at.tzinfo is not None
    assert store.get_routine("c", "t", "hourly") == created == store.get_routine_by_id(created.id)
    with pytest.raises(RoutineExists):
        store.create_routine(**_routine(store, "hourly"))
    other = store.create_routine(**_routine(store, "daily", description="once a day", enabled=False))
    assert other.id != created.id
    assert [r.name for r in store.list_routines("c")] == ["daily", "hourly"]
    assert [r.id for r in store.due_routines(T0)] == [created.id]

    later = T0 + timedelta(hours=1)
    assert store.claim_tick(created.id, T0, later, T0) is True
    assert store.claim_tick(created.id, T0, later, T0) is False, "the tick was moved on by the first claim"
    assert store.get_routine_by_id(created.id).next_run_at == later
    assert store.update_routine(other.id, enabled=True).enabled is True
    with pytest.raises(NotFoundError):
        store.update_routine(10_000, enabled=True)

    assert store.delete_routine(created.id) is True
    assert store.delete_routine(created.id) is False
    renewed = store.create_routine(**_routine(store, "hourly"))
    assert renewed.id > other.id, "a deleted routine's id is never given again"


def test_an_experiment_attempt_is_claimed_once_and_its_lease_held_by_one(store: Store) -> None:
    experiment = store.create_experiment(
        id="e1", collection="c", name="sweep", task="t", definition={"a": 1}, task_definition={"b": 2},
        cells={"cells": [{}, {}]}, status="running", reason=None, lease_owner=None, lease_until=None,
        ended_at=None,
    )  # fmt: skip
    assert (experiment.id, experiment.cells, experiment.lease_owner) == ("e1", {"cells": [{}, {}]}, None)
    assert store.get_experiment("e1") == experiment

    first = store.claim_attempt("e1", seq=0, cell=0, attempt=0, retry=0, trajectory_id="r0")
    assert first is not None and first.id > 0 and first.state == "claimed"
    assert store.claim_attempt("e1", seq=0, cell=0, attempt=0, retry=0, trajectory_id="r0-again") is None
    second = store.claim_attempt("e1", seq=1, cell=1, attempt=0, retry=0, trajectory_id="r1")
    assert second is not None and second.id != first.id
    store.mark_attempt(first.id, "done", "success")
    assert [(a.trajectory_id, a.state, a.outcome) for a in store.attempts("e1")] == [
        ("r0", "done", "success"),
        ("r1", "claimed", None),
    ]
    assert store.next_seq("e1") == 2

    store.create_run(Trajectory.new("r1", "c", "t"))
    assert list(store.runs_by_id(["r0", "r1"])) == ["r1"]

    until = T0 + timedelta(minutes=1)
    assert store.take_lease("e1", "server-a", until, T0) is True
    assert store.take_lease("e1", "server-b", until, T0) is False
    assert store.take_lease("e1", "server-b", until + timedelta(minutes=1), until + timedelta(seconds=1))
    assert store.get_experiment("e1").lease_owner == "server-b"


def test_audit_entries_and_tokens_get_their_ids_from_the_database(store: Store) -> None:
    store.create_collection("c")
    token_id = store.add_token("c", "hash", label="ci")
    assert store.token_for_hash("hash") == (token_id, "ci", "c")
    for status in (200, 403):
        store.add_audit(AuditEntry(at=T0, collection="c", actor=f"token:{token_id}", token_id=token_id,
                                   token_name="ci", action="POST /x", target={"k": "v"}, status=status))  # fmt: skip
    entries = store.list_audit(collection="c")
    assert [e.status for e in entries] == [403, 200]
    assert entries[0].id is not None and entries[1].id is not None and entries[0].id > entries[1].id
    assert entries[0].target == {"k": "v"} and entries[0].at == T0
    assert store.prune_audit(T0 + timedelta(seconds=1)) == 2
    assert store.revoke_token("c", token_id) == "hash"
    assert store.token_for_hash("hash") is None


def test_a_delivery_is_kept_once_and_leased_by_one_attempt(store: Store) -> None:
    delivery = StoredDelivery(id="d1", collection="c", trajectory_id="r1", url="https://example.test/hook",
                              sealed_secret=None, body="{}", state=PENDING, attempts=0, last_error=None,
                              created_at=T0, next_attempt_at=T0, deadline_at=T0 + timedelta(days=1))  # fmt: skip
    assert store.enqueue_delivery(delivery) is True
    assert store.enqueue_delivery(delivery) is False
    assert store.delivery("d1") == delivery
    assert store.due_deliveries(T0, limit=10) == [delivery]
    assert store.lease_delivery("d1", T0, T0 + timedelta(minutes=1)) is True
    assert store.lease_delivery("d1", T0, T0 + timedelta(minutes=1)) is False
    store.end_attempt("d1", state=DELIVERED, attempts=1, next_attempt_at=T0, error=None)
    assert store.due_deliveries(T0, limit=10) == []
    assert store.next_delivery_due() is None
