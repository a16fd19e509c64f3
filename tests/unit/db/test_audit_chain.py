"""The audit log's hash chain on both databases: writers at once never fork
it, a prune keeps it checkable, a change or a deletion breaks it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from sqlalchemy import text

from pier.db import Store
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
