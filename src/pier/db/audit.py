"""The audit log: one row per change a caller made or was refused."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, insert, select

from pier.db.base import StoreBase
from pier.db.schemas import AuditEntry
from pier.db.tables import audit_events, tokens


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
    )


class AuditStore(StoreBase):
    def add_audit(self, entry: AuditEntry) -> None:
        values = entry.model_dump(exclude={"id"})
        with self._write() as connection:
            connection.execute(insert(audit_events).values(**values))

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

    def prune_audit(self, older_than: datetime) -> int:
        with self._write() as connection:
            return connection.execute(delete(audit_events).where(audit_events.c.at < older_than)).rowcount

    def token_for_hash(self, token_hash: str) -> tuple[int, str | None, str] | None:
        """(id, name, collection) of a token; None when unknown."""
        query = select(tokens.c.id, tokens.c.label, tokens.c.collection).where(
            tokens.c.token_hash == token_hash
        )
        with self._read() as connection:
            row = connection.execute(query).first()
        return None if row is None else (row[0], row[1], row[2])
