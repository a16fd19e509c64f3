"""The audit log: one row per change a caller made or was refused, from the
API, the web UI, or a command on the server's store.

The entries are a hash chain: each one's `entry_hash` is SHA-256 over its
fields and the previous entry's hash (`prev_hash`), written under a lock so
that concurrent writers (replicas on one PostgreSQL) never fork it. A row
changed or deleted in the database breaks the chain at that place, and
`verify_audit` says where. Retention pruning deletes the oldest entries and
writes an entry that names the hash the remaining chain starts from, so a
prune is told from a deletion."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, delete, func, insert, select, update

from pier.db.base import StoreBase
from pier.db.schemas import AuditEntry
from pier.db.tables import audit_events, tokens
from pier.record import utcnow

PRUNE_ACTION = "audit prune"
CHAIN_LOCK = "pier.audit.chain"
HASHED = ("at", "collection", "actor", "token_id", "token_name", "action", "target", "status", "client",
          "user_agent", "object_id", "outcome", "source", "request_id")  # fmt: skip


def _entry(row: Row[Any]) -> AuditEntry:
    return AuditEntry(
        id=row.id,
        at=row.at,
        collection=row.collection,
        actor=row.actor,
        token_id=row.token_id,
        token_name=row.token_name,
        action=row.action,
        target=row.target,
        status=row.status,
        client=row.client,
        user_agent=row.user_agent,
        object_id=row.object_id,
        outcome=row.outcome,
        source=row.source,
        request_id=row.request_id,
        prev_hash=row.prev_hash,
        entry_hash=row.entry_hash,
    )


def entry_hash(entry: AuditEntry, prev_hash: str) -> str:
    """The chain's hash of an entry as stored (read back: what verify sees)."""
    fields = entry.model_dump(mode="json", include=set(HASHED))
    canonical = json.dumps({"prev": prev_hash, **fields}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class ChainReport:
    entries: int  # chained entries checked
    legacy: int  # entries from before the chain (no hash)
    problems: list[str]  # where it breaks, and how

    @property
    def intact(self) -> bool:
        return not self.problems


class AuditStore(StoreBase):
    def add_audit(self, entry: AuditEntry) -> AuditEntry:
        with self._write() as connection:
            return self._chain_append(connection, entry)

    def _chain_append(self, connection: Connection, entry: AuditEntry) -> AuditEntry:
        self._lock(connection, CHAIN_LOCK)
        last = connection.execute(
            select(audit_events.c.entry_hash)
            .where(audit_events.c.entry_hash.is_not(None))
            .order_by(audit_events.c.id.desc())
            .limit(1)
        ).scalar()
        prev = last or ""
        values = entry.model_dump(exclude={"id", "prev_hash", "entry_hash"})
        new_id = connection.execute(
            insert(audit_events).values(**values, prev_hash=prev)
        ).inserted_primary_key[0]
        stored = _entry(connection.execute(select(audit_events).where(audit_events.c.id == new_id)).one())
        digest = entry_hash(stored, prev)
        connection.execute(update(audit_events).where(audit_events.c.id == new_id).values(entry_hash=digest))
        return stored.model_copy(update={"entry_hash": digest})

    def list_audit(
        self,
        *,
        collection: str | None = None,
        action: str | None = None,
        actor: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[AuditEntry]:
        """Newest first; `collection` None reads every collection's (the admin's view)."""
        table = audit_events
        query = select(table).order_by(table.c.id.desc()).limit(limit)
        if collection is not None:
            query = query.where(table.c.collection == collection)
        if action:
            query = query.where(table.c.action.contains(action))
        if actor:
            query = query.where(table.c.actor == actor)
        if since is not None:
            query = query.where(table.c.at >= since)
        if until is not None:
            query = query.where(table.c.at < until)
        if before_id is not None:
            query = query.where(table.c.id < before_id)
        with self._read() as connection:
            return [_entry(row) for row in connection.execute(query)]

    def audit_after(self, after_id: int = 0, limit: int = 1000) -> list[AuditEntry]:
        """Oldest first, from the entry after `after_id` (an export's next page)."""
        query = (
            select(audit_events).where(audit_events.c.id > after_id).order_by(audit_events.c.id).limit(limit)
        )
        with self._read() as connection:
            return [_entry(row) for row in connection.execute(query)]

    def prune_audit(self, older_than: datetime) -> int:
        """Delete the entries older than `older_than`; an entry saying so (with
        the hash the rest of the chain starts from) is added when any went."""
        with self._write() as connection:
            self._lock(connection, CHAIN_LOCK)
            doomed = audit_events.c.at < older_than
            gone = (
                connection.execute(select(func.count()).select_from(audit_events).where(doomed)).scalar() or 0
            )
            if not gone:
                return 0
            first_kept = connection.execute(
                select(audit_events.c.id, audit_events.c.prev_hash)
                .where(~doomed, audit_events.c.entry_hash.is_not(None))
                .order_by(audit_events.c.id)
                .limit(1)
            ).first()
            connection.execute(delete(audit_events).where(doomed))
            anchor = first_kept.prev_hash if first_kept is not None else None
            note = AuditEntry(
                at=utcnow(), actor="pier", action=PRUNE_ACTION, status=200, outcome="ok", source="retention",
                target={"deleted": gone, "older_than": older_than.isoformat(),
                        "first_kept_id": first_kept.id if first_kept else None, "anchor": anchor},
            )  # fmt: skip
            self._chain_append(connection, note)
            return gone

    def verify_audit(self) -> ChainReport:
        """Walk the chain oldest first: each entry's hash must be its own, and
        its prev_hash the hash of the entry before it (or, for the first one
        kept after a prune, the anchor the prune recorded)."""
        problems: list[str] = []
        legacy = checked = 0
        anchors = set()
        previous: AuditEntry | None = None
        for entry in self._walk():
            if entry.entry_hash is None:
                legacy += 1
                continue
            if entry.action == PRUNE_ACTION and entry.target.get("anchor"):
                anchors.add(entry.target["anchor"])
            checked += 1
            if entry_hash(entry, entry.prev_hash or "") != entry.entry_hash:
                problems.append(f"entry {entry.id} was changed: its fields no longer give its hash")
            if previous is None:
                first = entry
            elif entry.prev_hash != previous.entry_hash:
                problems.append(
                    f"entries are missing between {previous.id} and {entry.id}: {entry.id}'s previous hash "
                    "is not the hash of the entry before it (deleted rows)"
                )
            previous = entry
        if previous is not None and first.prev_hash and first.prev_hash not in anchors:
            problems.append(
                f"entries before {first.id} are missing: the chain's first entry follows one no prune recorded"
            )
        return ChainReport(checked, legacy, problems)

    def _walk(self, page: int = 1000) -> Iterator[AuditEntry]:
        after = 0
        while True:
            batch = self.audit_after(after, page)
            yield from batch
            if len(batch) < page:
                return
            after = batch[-1].id or after

    def token_for_hash(self, token_hash: str) -> tuple[int, str | None, str] | None:
        """(id, name, collection) of a token; None when unknown."""
        query = select(tokens.c.id, tokens.c.label, tokens.c.collection).where(
            tokens.c.token_hash == token_hash
        )
        with self._read() as connection:
            row = connection.execute(query).first()
        return None if row is None else (row[0], row[1], row[2])
