"""Per-collection quota overrides (the admin's), and the counts quotas are
checked against. What a quota means belongs to the caller (pier.policies.quotas)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select

from pier.db.base import StoreBase
from pier.db.tables import collection_quotas, runs
from pier.record import RunStatus, utcnow


class QuotaStore(StoreBase):
    def quota_overrides(self, collection: str) -> dict[str, Any]:
        """The quotas the admin set for `collection`; {} when none."""
        query = select(collection_quotas.c.quotas).where(collection_quotas.c.collection == collection)
        with self._read() as connection:
            quotas = connection.scalar(query)
        return {} if quotas is None else dict(quotas)

    def set_quota_overrides(self, collection: str, quotas: dict[str, Any]) -> None:
        """Replace the collection's overrides ({} drops them all)."""
        statement = self._insert(collection_quotas).values(
            collection=collection, quotas=quotas, updated_at=utcnow()
        )
        statement = statement.on_conflict_do_update(
            index_elements=[collection_quotas.c.collection],
            set_={"quotas": statement.excluded.quotas, "updated_at": statement.excluded.updated_at},
        )
        with self._write() as connection:
            connection.execute(statement)

    def count_runs(self, collection: str, statuses: Iterable[RunStatus]) -> int:
        values = [status.value for status in statuses]
        query = select(func.count()).where(runs.c.collection == collection, runs.c.status.in_(values))
        with self._read() as connection:
            return int(connection.scalar(query) or 0)
