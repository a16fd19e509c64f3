"""A run is keyed by its trajectory id within its collection: two collections'
ingests may choose the same id and each keeps its own run and labels; a store
migrated from before keeps its labels on their runs."""

from __future__ import annotations

import json

import pytest
from alembic import command
from sqlalchemy import text

from pier.db import Store
from pier.db.engine import alembic_config, create_store_engine
from pier.errors import NotFoundError
from pier.record import Label, RunStatus, Trajectory


def _ended(tid: str, collection: str) -> Trajectory:
    record = Trajectory.new(tid, collection, "evals")
    record.status = RunStatus.completed
    return record


def test_two_collections_keep_their_own_run_under_one_id(store: Store) -> None:
    store.save_run(_ended("e1", "a"), replace_final=True)
    store.add_labels("e1", [Label(key="suite", value="a")], collection="a")
    store.save_run(_ended("e1", "b"), replace_final=True)
    store.add_labels("e1", [Label(key="suite", value="b")], replace=True, collection="b")

    assert [lb.value for lb in store.get_run("e1", "a").labels] == ["a"]
    assert [lb.value for lb in store.get_run("e1", "b").labels] == ["b"]
    assert [r.collection for r in store.runs_with_id("e1")] == ["a", "b"]
    with pytest.raises(NotFoundError, match="name its collection"):
        store.get_run("e1")
    with pytest.raises(NotFoundError):
        store.get_run("e1", "c")
    runs, total = store.list_runs("a", "evals", labels=[("suite", "b")])
    assert (runs, total) == ([], 0), "another collection's label on the same id matches nothing"
    runs, total = store.list_runs("b", "evals", labels=[("suite", "b")])
    assert total == 1 and runs[0].collection == "b"


def test_a_store_from_before_keeps_its_labels_on_their_runs(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), "experiments")  # label rows without a collection
            connection.execute(
                text(
                    "INSERT INTO runs (trajectory_id, collection, task, status, created_at, updated_at, record) "
                    "VALUES ('r1', 'team', 'evals', 'completed', :t, :t, :r)"
                ),
                {"t": "2026-01-01 12:00:00", "r": json.dumps(_ended("r1", "team").stored())},
            )
            connection.execute(
                text(
                    "INSERT INTO run_labels (trajectory_id, key, value, author, created) "
                    "VALUES ('r1', 'suite', 'x', 'me', :t)"
                ),
                {"t": "2026-01-01 12:00:00"},
            )
    finally:
        engine.dispose()
    with Store.open(store_url) as store:
        assert [lb.value for lb in store.get_run("r1", "team").labels] == ["x"]
        assert store.list_runs("team", labels=[("suite", "x")])[1] == 1
