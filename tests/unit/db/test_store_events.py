from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

from pier.db import Store


def test_append_event_numbers_lines_from_one(store: Store) -> None:
    assert store.last_seq("r1") == 0
    assert store.events("r1") == []
    assert store.append_event("r1", "first") == 1
    assert store.append_event("r1", "second", stage="prepare") == 2
    assert store.last_seq("r1") == 2
    events = store.events("r1")
    assert [(e.seq, e.stage, e.line) for e in events] == [(1, None, "first"), (2, "prepare", "second")]
    now = datetime.now(UTC)
    assert all(now - timedelta(minutes=1) < e.ts <= now for e in events)


def test_seqs_are_per_run(store: Store) -> None:
    store.append_event("r1", "a")
    store.append_event("r1", "b")
    assert store.append_event("r2", "x") == 1
    assert [e.line for e in store.events("r2")] == ["x"]


def test_append_events_batch_is_contiguous_and_ordered(store: Store) -> None:
    store.append_event("r1", "before")
    assert store.append_events("r1", (f"l{i}" for i in range(5)), stage="run_agent") == [2, 3, 4, 5, 6]
    assert store.append_events("r1", []) == []
    events = store.events("r1")
    assert [e.line for e in events] == ["before", "l0", "l1", "l2", "l3", "l4"]
    assert {e.stage for e in events[1:]} == {"run_agent"}


def test_events_after_seq_and_limit_page_through_the_log(store: Store) -> None:
    store.append_events("r1", [f"l{i}" for i in range(10)])
    assert [e.seq for e in store.events("r1", after_seq=7)] == [8, 9, 10]
    assert [e.seq for e in store.events("r1", after_seq=2, limit=3)] == [3, 4, 5]
    assert store.events("r1", after_seq=10) == []
    assert store.events("r1", limit=0) == []


def test_lines_keep_their_text_exactly(store: Store) -> None:
    text = "  tabs\tand unicode — ✓ and 'quotes' \"here\"  "
    store.append_event("r1", text)
    store.append_event("r1", "")
    assert [e.line for e in store.events("r1")] == [text, ""]


def test_concurrent_appends_from_8_threads_get_unique_contiguous_seqs(store: Store) -> None:
    threads_n, per_thread = 8, 25
    results: dict[int, list[int]] = {}
    barrier = threading.Barrier(threads_n)

    def worker(n: int) -> None:
        barrier.wait()
        results[n] = [store.append_event("r1", f"t{n}-{i}") for i in range(per_thread)]

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    total = threads_n * per_thread
    seqs = sorted(seq for got in results.values() for seq in got)
    assert seqs == list(range(1, total + 1))
    for got in results.values():
        assert got == sorted(got)  # one thread's lines keep their order
    events = store.events("r1", limit=total + 10)
    assert [e.seq for e in events] == list(range(1, total + 1))
    by_line = {e.line: e.seq for e in events}
    assert all(by_line[f"t{n}-{i}"] == results[n][i] for n in results for i in range(per_thread))


def test_concurrent_batches_stay_contiguous(store: Store) -> None:
    results: list[list[int]] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        for _ in range(5):
            seqs = store.append_events("r1", [f"{n}"] * 4)
            with lock:
                results.append(seqs)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(seqs == list(range(seqs[0], seqs[0] + 4)) for seqs in results)
    assert sorted(s for seqs in results for s in seqs) == list(range(1, 6 * 5 * 4 + 1))
    for seqs in results:  # a batch is not interleaved with another
        lines = {e.line for e in store.events("r1", after_seq=seqs[0] - 1, limit=4)}
        assert len(lines) == 1


def test_concurrent_appends_from_several_processes(store: Store, store_url: str) -> None:
    code = (
        "import sys\n"
        "from pier.db import Store\n"
        "s = Store.open(sys.argv[1])\n"
        "for i in range(20): s.append_event('r1', sys.argv[2])\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, store_url, f"p{n}"], stderr=subprocess.PIPE)
        for n in range(3)
    ]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert [e.seq for e in store.events("r1")] == list(range(1, 61))
