"""The audit log: one row per change a caller made or was refused, from the
API, the web UI, or a command on the server's store.

The entries are a hash chain: each one's `entry_hash` is SHA-256 over its
fields and the previous entry's hash (`prev_hash`), written under a lock so
that concurrent writers (replicas on one PostgreSQL) never fork it. A row
changed or deleted in the database breaks the chain at that place, and
`verify_audit` says where. Retention pruning deletes the oldest entries and
writes an entry that names the hash the remaining chain starts from, so a
prune is told from a deletion.

A chain alone cannot show that its newest entries were deleted: what is left
is a shorter chain, intact. So each writer also keeps the head it last wrote
(its id and hash) outside the database, in a file (`AuditHead`, in PIER_HOME),
and verify checks that the chain still reaches it; an export of the entries
(`pier audit export`, kept elsewhere) can be checked against the chain the
same way (docs/operations.md#the-audit-logs-threat-model)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Row, delete, func, insert, select, update

from pier.db.base import StoreBase
from pier.db.schemas import AuditEntry
from pier.db.tables import audit_events, tokens
from pier.record import utcnow

log = logging.getLogger(__name__)

PRUNE_ACTION = "audit prune"
HEAD_FILE = "audit.head"  # in PIER_HOME: the newest entry this machine wrote
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
    notes: list[str] = field(default_factory=list)  # what could not be checked, and why

    @property
    def intact(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Head:
    id: int
    hash: str
    database: str


class AuditHead:
    """The newest audit entry a process on this machine wrote (its id and
    hash, and which database it is in), in a file beside the database's
    credentials but outside its reach: one who can delete rows, and not write
    this file, cannot make the chain end earlier unseen. Writers on one
    machine share it under a lock, and it only moves forward."""

    def __init__(self, path: Path, database: str) -> None:
        self.path = path
        self.database = database

    def read(self) -> Head | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return Head(int(data["id"]), str(data["hash"]), str(data["database"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{self.path} is not an audit head pier wrote: {exc}") from exc

    def advance(self, entry: AuditEntry) -> None:
        """Record `entry` as the head, unless this file already names a newer
        one of the same database. A failure is logged: the entry is stored."""
        if entry.id is None or not entry.entry_hash:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    current = self.read()
                except ValueError:
                    current = None  # an unreadable head is replaced by a good one
                if current is not None and current.database == self.database and current.id >= entry.id:
                    return
                data = {"id": entry.id, "hash": entry.entry_hash, "database": self.database,
                        "at": entry.at.isoformat()}  # fmt: skip
                spare = self.path.with_name(self.path.name + ".tmp")
                with open(spare, "w", encoding="utf-8") as out:
                    out.write(json.dumps(data) + "\n")
                    out.flush()
                    os.fsync(out.fileno())
                os.chmod(spare, 0o600)
                os.replace(spare, self.path)
        except OSError as exc:
            log.warning("audit: could not record entry %s as the head in %s: %s", entry.id, self.path, exc)


class AuditStore(StoreBase):
    def anchor_audit(self, path: Path) -> AuditHead:
        """Keep the head of the chain this store writes in `path` too (and
        check it in verify_audit)."""
        self._audit_head = AuditHead(path, self.engine.url.render_as_string(hide_password=True))
        return self._audit_head

    def add_audit(self, entry: AuditEntry) -> AuditEntry:
        with self._write() as connection:
            stored = self._chain_append(connection, entry)
        self._written(stored)
        return stored

    def _written(self, stored: AuditEntry) -> None:
        head = getattr(self, "_audit_head", None)
        if head is not None:
            head.advance(stored)

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
        key = connection.execute(insert(audit_events).values(**values, prev_hash=prev)).inserted_primary_key
        assert key is not None  # a single-row insert's (SQLAlchemy types it Optional)
        new_id = key[0]
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
            stored = self._chain_append(connection, note)
        self._written(stored)  # the prune's entry is the new head
        return gone

    def verify_audit(self, exported: Mapping[int, str] | None = None) -> ChainReport:
        """Walk the chain oldest first: each entry's hash must be its own, and
        its prev_hash the hash of the entry before it (or, for the first one
        kept after a prune, the anchor the prune recorded). The chain must
        reach the head this machine recorded (anchor_audit), and hold every
        entry of `exported` (id: entry hash, an export's lines) not pruned
        since, unchanged."""
        problems: list[str] = []
        notes: list[str] = []
        legacy = checked = 0
        anchors = set()
        previous: AuditEntry | None = None
        head = self._head_to_check(notes)
        head_found: str | None = None
        held: dict[int, str] = {}
        for entry in self._walk():
            if head is not None and entry.id == head.id:
                head_found = entry.entry_hash or ""
            if exported is not None and entry.id is not None and entry.id in exported:
                held[entry.id] = entry.entry_hash or ""
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
        last = previous.id if previous is not None else None
        if head is not None:
            problems.extend(self._head_problems(head, head_found, last))
        if exported:
            problems.extend(
                _export_problems(exported, held, first.id if previous is not None else None, last)
            )
        return ChainReport(checked, legacy, problems, notes)

    def _head_to_check(self, notes: list[str]) -> Head | None:
        anchor: AuditHead | None = getattr(self, "_audit_head", None)
        if anchor is None:
            return None
        try:
            head = anchor.read()
        except ValueError as exc:
            notes.append(f"the newest entries were not checked: {exc}")
            return None
        if head is None:
            notes.append(f"no head recorded in {anchor.path} (nothing written from this machine yet): "
                         "a deletion of the newest entries cannot be told here")  # fmt: skip
        elif head.database != anchor.database:
            notes.append(f"{anchor.path} names another database's head ({head.database}): not checked")
            return None
        return head

    def _head_problems(self, head: Head, found: str | None, last: int | None) -> list[str]:
        anchor: AuditHead = self._audit_head
        if last is None or last < head.id:
            ends = "no chained entry is left" if last is None else f"the chain ends at entry {last}"
            after = "" if last is None else f" after {last}"
            return [f"the newest entries are missing: {ends}, but {anchor.path} records entry {head.id} "
                    f"(hash {head.hash[:16]}…) as written: the entries{after} up to {head.id} were deleted"]  # fmt: skip
        if found is None:
            return [f"entry {head.id}, the head {anchor.path} records, is missing"]
        if found != head.hash:
            return [f"entry {head.id} is not the entry written: its hash is not the one {anchor.path} records "
                    "(the chain was rewritten from there)"]  # fmt: skip
        return []

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


def _export_problems(
    exported: Mapping[int, str], held: Mapping[int, str], first: int | None, last: int | None
) -> list[str]:
    """What an export says was written and the chain no longer holds: entries
    before the chain's first were pruned (a prune entry says so), the rest
    must be there, with the same hash."""
    problems = []
    missing = sorted(i for i in exported if i not in held and (first is None or i >= first))
    if missing:
        newest = [i for i in missing if last is None or i > last]
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        tail = f" ({len(newest)} after the chain's last entry)" if newest else ""
        problems.append(f"{len(missing)} exported entr{'y is' if len(missing) == 1 else 'ies are'} missing "
                        f"from the database: {shown}{tail}")  # fmt: skip
    changed = sorted(i for i, digest in held.items() if digest != exported[i])
    if changed:
        shown = ", ".join(map(str, changed[:10])) + (" ..." if len(changed) > 10 else "")
        problems.append(f"{len(changed)} entr{'y differs' if len(changed) == 1 else 'ies differ'} from the "
                        f"export (their hashes): {shown}")  # fmt: skip
    return problems
