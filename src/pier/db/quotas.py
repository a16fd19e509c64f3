"""Per-collection quota overrides (the admin's), and the counts quotas are
checked against. What a quota means belongs to the caller (pier.lifecycle.quotas)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select

from pier.db.base import StoreBase
from pier.db.models import CollectionQuotaRow, RunRow
from pier.record import RunStatus, utcnow


class QuotaStore(StoreBase):
    def quota_overrides(self, collection: str) -> dict[str, Any]:
        """The quotas the admin set for `collection`; {} when none."""
        with self._read() as session:
            row = session.get(CollectionQuotaRow, collection)
        return {} if row is None else dict(row.quotas)

    def set_quota_overrides(self, collection: str, quotas: dict[str, Any]) -> None:
        """Replace the collection's overrides ({} drops them all)."""
        statement = self._insert(CollectionQuotaRow).values(
            collection=collection, quotas=quotas, updated_at=utcnow()
        )
        statement = statement.on_conflict_do_update(
            index_elements=[CollectionQuotaRow.collection],
            set_={"quotas": statement.excluded.quotas, "updated_at": statement.excluded.updated_at},
        )
        with self._write() as session:
            session.execute(statement)

    def count_runs(self, collection: str, statuses: Iterable[RunStatus]) -> int:
        values = [status.value for status in statuses]
        query = select(func.count()).where(RunRow.collection == collection, RunRow.status.in_(values))
        with self._read() as session:
            return int(session.scalar(query) or 0)
