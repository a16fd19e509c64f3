from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pier.db import Store
from pier.errors import InputError, NotFoundError
from pier.record import Label, ResultFile, RunStatus, Trajectory

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def _run(tid: str, collection: str = "c", task: str = "t", minutes: int = 0, **kw) -> Trajectory:
    return Trajectory.new(tid, collection, task, created=T0 + timedelta(minutes=minutes), **kw)


def test_create_then_get_round_trips_the_whole_record(store: Store) -> None:
    record = _run("r1", init_params={"agent": "script", "vars": {"x": 1}})
    record.stage("prepare").detail = "ok"
    record.set_results([ResultFile(path="a.md", content_type="text/markdown", extension="md", size=3)], [])
    record.fail("create", "boom")
    store.create_run(record)
    got = store.get_run("r1")
    assert got == record
    assert got.created.tzinfo is not None
    assert got.created == T0
    assert (
        got.outputs.files == ["c/t/r1/results/a.md"] and got.error == "boom" and got.failed_stage == "create"
    )


def test_create_twice_is_refused(store: Store) -> None:
    store.create_run(_run("r1"))
    with pytest.raises(InputError, match="'r1' already exists"):
        store.create_run(_run("r1"))


def test_get_missing_run_names_the_id(store: Store) -> None:
    with pytest.raises(NotFoundError, match="run 'nope' not found"):
        store.get_run("nope")


def test_save_run_inserts_then_updates(store: Store) -> None:
    record = _run("r1")
    store.save_run(record)
    assert store.get_run("r1").status == RunStatus.pending
    record.finish(RunStatus.completed, T0, 1.0)
    store.save_run(record)
    got = store.get_run("r1")
    assert (got.status, got.success) == (RunStatus.completed, True)
    assert store.list_runs(statuses=["completed"]) == ([got], 1)
    assert store.list_runs(statuses=["pending"]) == ([], 0)


def test_save_run_never_overwrites_a_status_already_final(store: Store) -> None:
    """Two processes end one run (a cancel from the API, the worker finishing):
    the first final status stays, whatever the second one saves."""
    record = _run("r1", status=RunStatus.running)
    store.save_run(record)
    cancelled = store.get_run("r1")
    cancelled.finish(RunStatus.cancelled, T0, 1.0)
    assert store.save_run(cancelled) is True
    record.finish(RunStatus.completed, T0, 2.0)
    assert store.save_run(record) is False
    got = store.get_run("r1")
    assert (got.status, got.duration_seconds) == (RunStatus.cancelled, 1.0)
    assert store.save_run(record, replace_final=True) is True, "unless the caller means to replace it"
    assert store.get_run("r1").status == RunStatus.completed


def test_save_run_bumps_updated_at(store: Store) -> None:
    from sqlalchemy import select

    from pier.db.tables import runs

    def updated_at() -> datetime:
        with store.engine.connect() as connection:
            value = connection.scalar(select(runs.c.updated_at))
            assert value is not None
            return value

    store.save_run(_run("r1"))
    first = updated_at()
    store.save_run(_run("r1", status=RunStatus.running))
    assert updated_at() > first


def test_list_runs_is_newest_first_with_total_and_paging(store: Store) -> None:
    for i in range(7):
        store.create_run(_run(f"r{i}", minutes=i))
    page, total = store.list_runs(limit=3)
    assert total == 7
    assert [r.trajectory_id for r in page] == ["r6", "r5", "r4"]
    page, total = store.list_runs(limit=3, offset=6)
    assert ([r.trajectory_id for r in page], total) == (["r0"], 7)
    assert store.list_runs(limit=3, offset=10) == ([], 7)
    assert store.list_runs(limit=0)[1] == 7


def test_list_runs_filters_by_collection_task_and_status(store: Store) -> None:
    store.create_run(_run("a1", "ca", "t1", 0))
    store.create_run(_run("a2", "ca", "t2", 1, status=RunStatus.running))
    store.create_run(_run("b1", "cb", "t1", 2, status=RunStatus.failed))

    def ids(**kw) -> list[str]:
        runs, total = store.list_runs(**kw)
        assert total == len(runs)
        return [r.trajectory_id for r in runs]

    assert ids() == ["b1", "a2", "a1"]
    assert ids(collection="ca") == ["a2", "a1"]
    assert ids(collection="ca", task="t1") == ["a1"]
    assert ids(task="t1") == ["b1", "a1"]
    assert ids(statuses=[RunStatus.running, "failed"]) == ["b1", "a2"]
    assert ids(collection="ca", statuses=["failed"]) == []
    assert ids(statuses=[]) == []
    assert ids(collection="zz") == []


def test_list_runs_refuses_bad_input(store: Store) -> None:
    with pytest.raises(InputError, match="run status is one of"):
        store.list_runs(statuses=["done"])
    with pytest.raises(InputError, match="limit and offset"):
        store.list_runs(limit=-1)
    with pytest.raises(InputError, match="limit and offset"):
        store.list_runs(offset=-1)


def test_runs_with_status_is_oldest_first(store: Store) -> None:
    store.create_run(_run("late", minutes=5, status=RunStatus.running))
    store.create_run(_run("early", minutes=1, status=RunStatus.pending))
    store.create_run(_run("done", minutes=0, status=RunStatus.completed))
    found = store.runs_with_status([RunStatus.pending, RunStatus.running])
    assert [r.trajectory_id for r in found] == ["early", "late"]
    assert store.runs_with_status(["cancelled"]) == []


def test_labels_show_on_the_run_survive_its_saves_and_filter_lists(store: Store) -> None:
    record = _run("r1")
    store.create_run(record)
    store.create_run(_run("r2", minutes=1))
    store.add_labels("r1", [Label(key="eval.grade", value="0.9"), Label(key="reviewed", value="yes")])
    store.save_run(record)  # the runner saves its copy, which has no labels: they stay
    got = store.get_run("r1")
    assert [(lb.key, lb.value) for lb in got.labels] == [("eval.grade", "0.9"), ("reviewed", "yes")]
    assert store.list_runs(labels=[("eval.grade", "0.9")])[0] == [got]
    assert store.list_runs(labels=[("eval.grade", None), ("reviewed", "yes")])[1] == 1
    assert store.list_runs(labels=[("eval.grade", "0.1")]) == ([], 0)
    store.add_labels("r1", [Label(key="x", value="1")], replace=True)
    assert [lb.key for lb in store.get_run("r1").labels] == ["x"]
    with pytest.raises(NotFoundError):
        store.add_labels("nope", [Label(key="x", value="1")])


def test_list_runs_filters_by_creation_time_and_success(store: Store) -> None:
    for tid, minutes, success in (("old", 0, True), ("mid", 60, False), ("new", 120, None)):
        record = _run(tid, minutes=minutes)
        record.outputs.success = success
        store.create_run(record)
    ids = lambda **kw: [r.trajectory_id for r in store.list_runs("c", **kw)[0]]  # noqa: E731
    assert ids(since=T0 + timedelta(minutes=60)) == ["new", "mid"]
    assert ids(until=T0 + timedelta(minutes=60)) == ["old"]  # until is excluded
    assert ids(success=True) == ["old"]
    assert ids(success=False) == ["mid"]  # a run without a recorded success matches neither
    assert store.list_runs("c", success=False, since=T0 + timedelta(minutes=61))[1] == 0
