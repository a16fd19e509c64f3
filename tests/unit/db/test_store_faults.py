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


def test_a_database_that_accepts_but_never_answers_fails_the_connect_within_its_bound(monkeypatch) -> None:
    """A PostgreSQL host that takes the TCP connection and then says nothing (a
    frozen server, a half-open path through a firewall): libpq's default is to
    wait for ever, which hangs every request and run that needs the store. pier
    gives each connect a bound (10 s unless the URL names its own
    `connect_timeout`; 1 s here), so the caller gets the driver's error, which
    the API answers 503 and a run's writes retry."""
    import socket
    import threading
    import time

    from sqlalchemy import text

    from pier.db.engine import create_store_engine

    monkeypatch.setattr("pier.db.engine.CONNECT_TIMEOUT_SEC", 1)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nobody ever reads
    port = silent.getsockname()[1]
    engine = create_store_engine(f"postgresql+psycopg://pier:pier@127.0.0.1:{port}/pier")
    outcome: list[BaseException | None] = []

    def connect() -> None:
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout=20)
    try:
        assert outcome, "the connect to a server that never answers was still waiting after 20 s"
        assert isinstance(outcome[0], OperationalError), outcome[0]
        assert time.monotonic() - started < 10
    finally:
        silent.close()
        engine.dispose()


def test_every_connection_to_postgresql_has_a_connect_bound_unless_the_url_names_its_own() -> None:
    """The store's engine and the plain connections that LISTEN (conninfo) both
    carry the bound; an operator's own `connect_timeout` in the URL wins."""
    from psycopg.conninfo import conninfo_to_dict

    from pier.db.engine import conninfo, create_store_engine

    default = create_store_engine("postgresql+psycopg://u:p@127.0.0.1:1/db")
    given = create_store_engine("postgresql+psycopg://u:p@127.0.0.1:1/db?connect_timeout=3")
    try:
        assert str(default.dialect.create_connect_args(default.url)[1]["connect_timeout"]) == "10"
        assert str(given.dialect.create_connect_args(given.url)[1]["connect_timeout"]) == "3"
    finally:
        default.dispose()
        given.dispose()
    assert conninfo_to_dict(conninfo("postgresql+psycopg://u:p@h/db"))["connect_timeout"] == "10"
    # and each session ends a transaction left idle past its bound; the URL's own options are kept
    options = conninfo_to_dict(conninfo("postgresql+psycopg://u:p@h/db?options=-csearch_path%3Ds"))["options"]
    assert options == "-csearch_path=s -c idle_in_transaction_session_timeout=20000"
    own = "postgresql+psycopg://u:p@h/db?options=-c%20idle_in_transaction_session_timeout%3D5s"
    assert conninfo_to_dict(conninfo(own))["options"] == "-c idle_in_transaction_session_timeout=5s"
    assert (
        conninfo_to_dict(conninfo("postgresql+psycopg://u:p@h/db?connect_timeout=4"))["connect_timeout"]
        == "4"
    )


def test_the_retry_rules_do_not_load_the_postgresql_driver() -> None:
    """`pier run` on SQLite loads pier.db.retry (its writes ride out a busy
    database) but never the PostgreSQL driver: psycopg costs a tenth of a
    second of start-up. Its errors are still known once it is loaded."""
    import subprocess
    import sys

    probe = "import sys, pier.db.retry; print('psycopg' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"
    import psycopg

    from pier.db.retry import transient

    assert transient(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert not transient(psycopg.errors.UniqueViolation("duplicate key"))


FROZEN_HOLDER = """
import os, signal, sys
import pier.db.engine
pier.db.engine.IDLE_IN_TRANSACTION_SEC = 2
from pier.db import Store
store = Store.open(sys.argv[1])
with store._write() as session:
    store._lock(session, "pier.run_events:" + sys.argv[2])
    print("locked", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # frozen inside its transaction, its lock held
"""


def test_a_process_frozen_inside_a_transaction_holds_no_lock_past_its_bound(tmp_path) -> None:
    """A replica or worker frozen (SIGSTOP) in the middle of a write keeps its
    transaction, and its advisory lock, open for as long as it stays frozen:
    every other process's write to that run's log waited behind it, without
    end (a fleet test saw a run's restart hang this way). pier's sessions carry
    idle_in_transaction_session_timeout (IDLE_IN_TRANSACTION_SEC; 2 s in the
    frozen process here), so PostgreSQL ends the frozen session and the
    others' writes go on."""
    import signal
    import subprocess
    import sys
    import threading
    import time

    from tests.support.services import postgres_url

    from pier.db.engine import scratch_schema

    schema = scratch_schema(postgres_url(), prefix="pier_frozen")
    url = next(schema)
    tid = "frozen-holder-run"
    holder = subprocess.Popen(
        [sys.executable, "-c", FROZEN_HOLDER, url, tid], stdout=subprocess.PIPE, text=True
    )
    store = Store.open(url)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        outcome: list[object] = []
        writer = threading.Thread(
            target=lambda: outcome.append(store.append_event(tid, "after the freeze")), daemon=True
        )
        started = time.monotonic()
        writer.start()
        writer.join(timeout=20)
        assert outcome == [1], "a write was still waiting for the frozen process's lock after 20 s"
        assert time.monotonic() - started < 15
        assert [e.line for e in store.events(tid)] == ["after the freeze"]
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait()
        store.close()
        schema.close()
