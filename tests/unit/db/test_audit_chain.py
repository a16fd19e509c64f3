"""The audit log's hash chain on both databases: writers at once never fork
it, a prune keeps it checkable, a change or a deletion breaks it; the head
kept outside the database (and an export) shows a deletion of the newest
entries, which leaves the chain itself whole."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from sqlalchemy import text

from pier.db import Store
from pier.db.audit import HEAD_FILE
from pier.db.schemas import AuditEntry
from pier.record import utcnow


def entry(days_ago: float = 0, action: str = "POST /x") -> AuditEntry:
    return AuditEntry(at=utcnow() - timedelta(days=days_ago), actor="admin", action=action, status=200)


def test_retention_prunes_old_entries_and_the_chain_still_verifies(store: Store):
    for days in (100, 95, 10, 1):
        store.add_audit(entry(days))
    assert store.prune_audit(utcnow() - timedelta(days=90)) == 2
    kept = store.list_audit(limit=100)
    assert [e.action for e in kept] == ["audit prune", "POST /x", "POST /x"]
    assert kept[0].target["deleted"] == 2
    assert store.verify_audit().intact, store.verify_audit().problems
    assert store.prune_audit(utcnow() - timedelta(days=90)) == 0  # nothing more: no new prune entry
    assert len(store.list_audit(limit=100)) == 3


def test_concurrent_writers_keep_one_chain(store_url: str):
    stores = [Store.open(store_url) for _ in range(4)]
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: stores[i % 4].add_audit(entry(action=f"POST /{i}")), range(80)))
        report = stores[0].verify_audit()
        assert report.intact and report.entries == 80, report.problems
    finally:
        for opened in stores:
            opened.close()


def test_a_change_and_a_deletion_break_the_chain_where_they_are(store: Store):
    ids = [store.add_audit(entry(action=f"POST /{i}")).id for i in range(5)]
    with store.engine.begin() as connection:
        connection.execute(text(f"UPDATE audit_events SET status = 204 WHERE id = {ids[1]}"))
        connection.execute(text(f"DELETE FROM audit_events WHERE id = {ids[3]}"))
    problems = store.verify_audit().problems
    assert any(f"entry {ids[1]} was changed" in p for p in problems), problems
    assert any(f"between {ids[2]} and {ids[4]}" in p for p in problems), problems


def anchored(store: Store, tmp_path: Path) -> Path:
    head = tmp_path / "home" / HEAD_FILE
    store.anchor_audit(head)
    return head


def test_deleting_the_newest_entries_is_detected_by_the_head_kept_outside(store: Store, tmp_path: Path):
    head = anchored(store, tmp_path)
    ids = [store.add_audit(entry(action=f"POST /{i}")).id for i in range(6)]
    clean = store.verify_audit()
    assert clean.intact and clean.entries == 6 and not clean.notes, (clean.problems, clean.notes)
    assert json.loads(head.read_text())["id"] == ids[-1]
    with store.engine.begin() as connection:  # one with the database's credentials, not this machine's files
        connection.execute(text(f"DELETE FROM audit_events WHERE id > {ids[2]}"))
    (problem,) = store.verify_audit().problems
    assert "newest entries are missing" in problem
    assert f"the chain ends at entry {ids[2]}" in problem and f"records entry {ids[-1]}" in problem
    assert f"after {ids[2]} up to {ids[-1]} were deleted" in problem


def test_deleting_every_entry_or_rewriting_the_head_is_detected(store: Store, tmp_path: Path):
    anchored(store, tmp_path)
    ids = [store.add_audit(entry(action=f"POST /{i}")).id for i in range(3)]
    with store.engine.begin() as connection:  # the head rewritten with a forged hash
        connection.execute(text(f"UPDATE audit_events SET entry_hash = 'f00d' WHERE id = {ids[-1]}"))
    problems = store.verify_audit().problems
    assert any(f"entry {ids[-1]} is not the entry written" in p for p in problems), problems
    with store.engine.begin() as connection:
        connection.execute(text("DELETE FROM audit_events"))
    (problem,) = store.verify_audit().problems
    assert "no chained entry is left" in problem and f"records entry {ids[-1]}" in problem


def test_a_prune_moves_the_head_and_another_writer_keeps_it_moving_forward(store_url: str, tmp_path: Path):
    with Store.open(store_url) as first, Store.open(store_url) as second:
        head = anchored(first, tmp_path)
        anchored(second, tmp_path)
        for days in (100, 95, 1):
            first.add_audit(entry(days))
        newest = second.add_audit(entry()).id
        assert first.prune_audit(utcnow() - timedelta(days=90)) == 2
        pruned = json.loads(head.read_text())["id"]
        assert pruned > newest, "the prune's own entry is the head"
        report = second.verify_audit()
        assert report.intact, report.problems


def test_an_export_kept_elsewhere_names_the_entries_the_database_lost(store: Store):
    ids = [store.add_audit(entry(action=f"POST /{i}")).id for i in range(5)]
    exported = {e.id: e.entry_hash for e in store.audit_after(0)}
    assert store.verify_audit(exported=exported).intact
    with store.engine.begin() as connection:
        connection.execute(text(f"DELETE FROM audit_events WHERE id >= {ids[3]}"))
    problems = store.verify_audit(exported=exported).problems
    assert problems == [f"2 exported entries are missing from the database: {ids[3]}, {ids[4]} "
                        "(2 after the chain's last entry)"]  # fmt: skip
    assert store.verify_audit().intact, "without the head or an export, a shorter chain looks whole"


def test_a_head_of_another_database_is_noted_not_failed(store: Store, tmp_path: Path):
    head = anchored(store, tmp_path)
    store.add_audit(entry())
    head.write_text(json.dumps({"id": 99, "hash": "ab", "database": "sqlite:///elsewhere.db"}))
    report = store.verify_audit()
    assert report.intact and any("another database" in note for note in report.notes), report.notes
