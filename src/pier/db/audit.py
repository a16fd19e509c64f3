"""The audit log: one row per change a caller made or was refused."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, delete, select

from pier.db.base import StoreBase
from pier.db.models import AuditRow, TokenRow
from pier.db.schemas import AuditEntry


def _entry(row: AuditRow) -> AuditEntry:
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
        with self._write() as session:
            session.add(AuditRow(**values))

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
        query = select(AuditRow).order_by(AuditRow.id.desc()).limit(limit)
        if collection is not None:
            query = query.where(AuditRow.collection == collection)
        if action:
            query = query.where(AuditRow.action.contains(action))
        if actor:
            query = query.where(AuditRow.actor == actor)
        if since is not None:
            query = query.where(AuditRow.at >= since)
        if until is not None:
            query = query.where(AuditRow.at < until)
        if before_id is not None:
            query = query.where(AuditRow.id < before_id)
        with self._read() as session:
            return [_entry(row) for row in session.scalars(query)]

    def prune_audit(self, older_than: datetime) -> int:
        with self._write() as session:
            result = session.execute(delete(AuditRow).where(AuditRow.at < older_than))
            return cast(CursorResult[Any], result).rowcount

    def token_for_hash(self, token_hash: str) -> tuple[int, str | None, str] | None:
        """(id, name, collection) of a token; None when unknown."""
        query = select(TokenRow.id, TokenRow.label, TokenRow.collection).where(
            TokenRow.token_hash == token_hash
        )
        with self._read() as session:
            row = session.execute(query).first()
        return None if row is None else (row[0], row[1], row[2])
