from __future__ import annotations

import pytest

from pier.db import Store
from pier.errors import InputError
from pier.record import Trajectory


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
