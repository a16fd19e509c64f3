"""The durable webhook queue: one row per delivery, kept until a receiver took
it or its window closed, so deliveries survive restarts and any server of a
fleet can make the next attempt. Storage only: timing and signing belong to
pier.policies.webhooks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, or_, select, update

from pier.db.base import StoreBase
from pier.db.tables import webhook_deliveries

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


@dataclass(frozen=True)
class StoredDelivery:
    id: str
    collection: str
    trajectory_id: str
    url: str
    sealed_secret: str | None
    body: str
    state: str
    attempts: int
    last_error: str | None
    created_at: datetime
    next_attempt_at: datetime
    deadline_at: datetime


def _delivery(row: Row[Any]) -> StoredDelivery:
    return StoredDelivery(
        row.id, row.collection, row.trajectory_id, row.url, row.sealed_secret, row.body, row.state,
        row.attempts, row.last_error, row.created_at, row.next_attempt_at, row.deadline_at,
    )  # fmt: skip


class DeliveryStore(StoreBase):
    def enqueue_delivery(self, delivery: StoredDelivery) -> bool:
        """Keep a new delivery; False (and nothing changed) when one of that id exists."""
        values = {**delivery.__dict__, "leased_until": None}
        statement = self._insert(webhook_deliveries).values(**values)
        # Told by the row RETURNING gives back, not by the rowcount: PostgreSQL's
        # driver gives -1 for an INSERT's (SQLAlchemy keeps it only for UPDATE
        # and DELETE), so every new delivery read as one kept already.
        statement = statement.on_conflict_do_nothing(index_elements=[webhook_deliveries.c.id]).returning(
            webhook_deliveries.c.id
        )
        with self._write() as connection:
            return connection.execute(statement).first() is not None

    def delivery(self, delivery_id: str) -> StoredDelivery | None:
        query = select(webhook_deliveries).where(webhook_deliveries.c.id == delivery_id)
        with self._read() as connection:
            row = connection.execute(query).first()
        return None if row is None else _delivery(row)

    def due_deliveries(self, now: datetime, limit: int, exclude: Iterable[str] = ()) -> list[StoredDelivery]:
        """Pending deliveries whose next attempt is due and that no attempt
        holds, but for the collections in `exclude` (whose lanes are full: their
        backlog must not hide another collection's due delivery)."""
        query = (
            select(webhook_deliveries)
            .where(
                webhook_deliveries.c.state == PENDING,
                webhook_deliveries.c.next_attempt_at <= now,
                or_(webhook_deliveries.c.leased_until.is_(None), webhook_deliveries.c.leased_until < now),
            )
            .order_by(webhook_deliveries.c.next_attempt_at)
            .limit(limit)
        )
        excluded = list(exclude)
        if excluded:
            query = query.where(webhook_deliveries.c.collection.not_in(excluded))
        with self._read() as connection:
            return [_delivery(row) for row in connection.execute(query).all()]

    def next_delivery_due(self) -> datetime | None:
        column = webhook_deliveries.c.next_attempt_at
        query = select(column).where(webhook_deliveries.c.state == PENDING)
        with self._read() as connection:
            return connection.scalar(query.order_by(column).limit(1))

    def lease_delivery(self, delivery_id: str, now: datetime, until: datetime) -> bool:
        """Take the delivery for one attempt, atomically: False when another
        attempt holds it (here or on another server) or it is no longer pending."""
        statement = (
            update(webhook_deliveries)
            .where(
                webhook_deliveries.c.id == delivery_id,
                webhook_deliveries.c.state == PENDING,
                or_(webhook_deliveries.c.leased_until.is_(None), webhook_deliveries.c.leased_until < now),
            )
            .values(leased_until=until)
        )
        with self._write() as connection:
            return connection.execute(statement).rowcount == 1

    def end_attempt(
        self, delivery_id: str, *, state: str, attempts: int, next_attempt_at: datetime, error: str | None
    ) -> None:
        """Record an attempt's outcome and release the lease."""
        statement = (
            update(webhook_deliveries)
            .where(and_(webhook_deliveries.c.id == delivery_id))
            .values(
                state=state, attempts=attempts, next_attempt_at=next_attempt_at, last_error=error,
                leased_until=None,
            )
        )  # fmt: skip
        with self._write() as connection:
            connection.execute(statement)
