"""The scheduler on a real store with a hand-moved clock: a tick fires once when
it is due, a missed stretch fires once, a paused routine never, and any number
of schedulers sharing the store fire each tick exactly once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from pier.db import Store, StoredRoutine
from pier.db.routines import RoutineExists
from pier.record import Trajectory
from pier.routines import RoutineError, Routines
from pier.routines.scheduler import Scheduler

TASK = {"init_params": {"instruction": "say hi", "agent": "script"}}


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2026, 5, 1, 10, 0, 30, tzinfo=UTC))


@pytest.fixture
def routines(store: Store, clock: Clock) -> Routines:
    store.create_collection("c")
    store.put_task("c", "t", TASK)
    return Routines(store, clock)


def scheduler(store: Store, clock: Clock, fired: list[StoredRoutine]) -> Scheduler:
    return Scheduler(store, fired.append, poll_sec=60, clock=clock)


def test_a_tick_fires_once_when_due(store, routines, clock):
    routine = routines.create("c", "t", "every-minute", "* * * * *")
    assert routine.next_run_at == datetime(2026, 5, 1, 10, 1, tzinfo=UTC)
    fired: list[StoredRoutine] = []
    poller = scheduler(store, clock, fired)
    assert poller.poll() == []  # 10:00:30: not yet
    clock.advance(seconds=35)  # 10:01:05
    assert [r.name for r in poller.poll()] == ["every-minute"]
    assert poller.poll() == []  # the same tick, polled again: nothing
    after = routines.get("c", "t", "every-minute")
    assert after.next_run_at == datetime(2026, 5, 1, 10, 2, tzinfo=UTC)
    assert after.last_run_at == clock.now
    assert len(fired) == 1


def test_a_missed_stretch_fires_once(store, routines, clock):
    routines.create("c", "t", "every-minute", "* * * * *")
    fired: list[StoredRoutine] = []
    poller = scheduler(store, clock, fired)
    clock.advance(hours=3)  # the server was down: 180 ticks went by
    assert len(poller.poll()) == 1
    assert poller.poll() == []
    assert routines.get("c", "t", "every-minute").next_run_at == datetime(2026, 5, 1, 13, 1, tzinfo=UTC)


def test_paused_routines_do_not_fire_and_resume_from_now(store, routines, clock):
    routine = routines.create("c", "t", "hourly", "0 * * * *")
    paused = routines.pause(routine)
    assert not paused.enabled and paused.next_run_at is None
    fired: list[StoredRoutine] = []
    poller = scheduler(store, clock, fired)
    clock.advance(hours=5)
    assert poller.poll() == []
    resumed = routines.resume(paused)
    assert resumed.next_run_at == datetime(2026, 5, 1, 16, 0, tzinfo=UTC)  # not the ticks it slept through
    assert poller.poll() == []
    clock.advance(hours=1)
    assert len(poller.poll()) == 1


def test_a_run_now_request_fires_once_even_when_paused(store, routines, clock):
    routine = routines.pause(routines.create("c", "t", "nightly", "0 3 * * *", "Europe/Berlin"))
    routines.request_run_now(routine)
    fired: list[StoredRoutine] = []
    poller = scheduler(store, clock, fired)
    assert [r.name for r in poller.poll()] == ["nightly"]
    assert poller.poll() == []
    assert routines.get("c", "t", "nightly").run_now_at is None


def test_changing_the_schedule_counts_from_now(store, routines, clock):
    routine = routines.create("c", "t", "r", "0 0 * * *")
    changed = routines.update(routine, {"cron_expression": "30 10 * * *", "timezone": "Europe/Berlin"})
    assert changed.next_run_at == datetime(2026, 5, 2, 8, 30, tzinfo=UTC)  # 10:30 CEST tomorrow
    assert routines.update(changed, {"init_params": {"vars": {"x": "1"}}}).next_run_at == changed.next_run_at


def test_servers_sharing_a_store_fire_each_tick_exactly_once(store_url, routines, clock):
    """Four schedulers, each on its own Store (own connections, as separate
    processes have), poll the same clock at the same moment, over and over."""
    names = [f"r{i}" for i in range(10)]
    for name in names:
        routines.create("c", "t", name, "* * * * *")
    fired: list[StoredRoutine] = []
    lock = threading.Lock()

    def record(routine: StoredRoutine) -> None:
        with lock:
            fired.append(routine)

    stores = [Store.open(store_url) for _ in range(4)]
    pollers = [Scheduler(s, record, poll_sec=60, clock=clock) for s in stores]
    try:
        for _minute in range(3):
            clock.advance(minutes=1)
            start = threading.Barrier(len(pollers))

            def poll(poller: Scheduler, start: threading.Barrier = start) -> None:
                start.wait()
                for _ in range(3):
                    poller.poll()

            threads = [threading.Thread(target=poll, args=(p,)) for p in pollers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
    finally:
        for s in stores:
            s.close()
    counts = {name: sum(1 for r in fired if r.name == name) for name in names}
    assert counts == dict.fromkeys(names, 3)  # three minutes, three ticks each


def test_claiming_a_tick_succeeds_for_one_caller_only(store_url, routines, clock):
    routine = routines.create("c", "t", "r", "* * * * *")
    assert routine.next_run_at is not None
    following = routine.next_run_at + timedelta(minutes=1)
    stores = [Store.open(store_url) for _ in range(6)]
    start = threading.Barrier(len(stores))
    results: list[bool] = []

    def claim(s: Store) -> None:
        start.wait()
        results.append(s.claim_tick(routine.id, routine.next_run_at, following, clock.now))

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for s in stores:
            s.close()
    assert sorted(results) == [False] * 5 + [True]


def test_bad_input_names_the_field(store, routines):
    cases = [
        ({"cron": "61 * * * *"}, "cron_expression"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"task": "missing"}, "task"),
        ({"name": ".hidden"}, "name"),
        ({"init_params": {"webhook_secret": "s"}}, "init_params.webhook_secret"),
        ({"init_params": {"checks": [{"name": "x", "type": "nope"}]}}, "init_params"),
        ({"init_params": {"vars": "x"}}, "init_params"),
    ]
    for override, field in cases:
        args = {"collection": "c", "task": "t", "name": "r", "cron": "* * * * *", **override}
        with pytest.raises(RoutineError) as info:
            routines.create(**args)
        assert info.value.field == field, (override, str(info.value))
    assert store.list_routines("c") == []


def test_a_name_is_unique_per_task(routines):
    routines.create("c", "t", "r", "* * * * *")
    with pytest.raises(RoutineExists, match="exists"):
        routines.create("c", "t", "r", "0 * * * *")


def test_a_routines_runs_are_the_ones_that_name_it(store, routines):
    mine = routines.create("c", "t", "mine", "* * * * *")
    other = routines.create("c", "t", "other", "* * * * *")
    for tid, routine_id in (("a", mine.id), ("b", other.id), ("c", None), ("d", mine.id)):
        store.create_run(Trajectory.new(tid, "c", "t", triggered_by_routine_id=routine_id))
    assert sorted(r.trajectory_id for r in store.routine_runs(mine)) == ["a", "d"]
    assert [r.trajectory_id for r in store.routine_runs(other)] == ["b"]
    routines.delete(mine)
    assert store.get_run("a").triggered_by_routine_id == mine.id  # its runs stay


def test_an_id_is_never_given_again_after_a_delete(store, routines):
    first = routines.create("c", "t", "nightly", "* * * * *")
    store.create_run(Trajectory.new("old-run", "c", "t", triggered_by_routine_id=first.id))
    routines.delete(first)
    second = routines.create("c", "t", "nightly", "* * * * *")
    assert second.id != first.id
    assert store.routine_runs(second) == []  # never the deleted routine's runs


def test_a_database_outage_is_one_line_per_round_not_a_stack_trace(caplog):
    """A background loop's round during a database outage (docs/faults.md: an
    expected fault) logs one line saying the database is unreachable; another
    error keeps its stack trace. On the code before, each round of the outage
    logged a full trace."""
    import logging

    from sqlalchemy.exc import OperationalError

    class Down:
        def __init__(self, error: Exception):
            self.error = error

        def due_routines(self, now):
            raise self.error

    refused = OperationalError("SELECT", {}, Exception("connection refused\nIs the server running?"))
    for error, traced in ((refused, False), (ValueError("a bug"), True)):
        caplog.clear()
        poller = Scheduler(Down(error), lambda r: None, poll_sec=60)  # type: ignore[arg-type]
        poller._stop.set()  # one round, then the loop ends
        with caplog.at_level(logging.WARNING, logger="pier.routines.scheduler"):
            poller._loop()
        [record] = caplog.records
        assert (record.exc_info is not None) is traced, record.getMessage()
        if not traced:
            assert "the database is unreachable (" in record.getMessage()
            assert "connection refused" in record.getMessage()
