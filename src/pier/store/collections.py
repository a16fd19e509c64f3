"""Collections and what hangs off them: API tokens, stored tasks, environment.

Storage only: token hashing and secret encryption belong to the caller.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import CursorResult, delete, select
from sqlalchemy.exc import IntegrityError

from pier.errors import InputError, NotFoundError
from pier.record import utcnow
from pier.store.base import StoreBase
from pier.store.models import CollectionEnvRow, CollectionRow, TaskRow, TokenRow
from pier.store.schemas import Collection, StoredTask, TokenInfo


def _collection(row: CollectionRow) -> Collection:
    return Collection(name=row.name, created_at=row.created_at)


def _task(row: TaskRow) -> StoredTask:
    return StoredTask(
        collection=row.collection,
        name=row.name,
        definition=row.definition,
        description=row.description,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class CollectionStore(StoreBase):
    def create_collection(self, name: str) -> Collection:
        """Create the collection, or return it unchanged when it exists."""
        statement = self._insert(CollectionRow).values(name=name, created_at=utcnow())
        with self._write() as session:
            session.execute(statement.on_conflict_do_nothing(index_elements=[CollectionRow.name]))
        return self.get_collection(name)

    def get_collection(self, name: str) -> Collection:
        with self._read() as session:
            row = session.get(CollectionRow, name)
        if row is None:
            raise NotFoundError(f"collection {name!r} not found: create it first")
        return _collection(row)

    def list_collections(self) -> list[Collection]:
        with self._read() as session:
            rows = session.scalars(select(CollectionRow).order_by(CollectionRow.name)).all()
        return [_collection(row) for row in rows]

    def add_token(self, collection: str, token_hash: str, label: str | None = None) -> int:
        """Register a token (by its hash) for an existing collection; returns its id."""
        self.get_collection(collection)
        row = TokenRow(collection=collection, token_hash=token_hash, created_at=utcnow(), label=label)
        try:
            with self._write() as session:
                session.add(row)
                session.flush()
                return row.id
        except IntegrityError:
            raise InputError("that token is already registered: issue a new one") from None

    def list_tokens(self, collection: str) -> list[TokenInfo]:
        """The collection's tokens, oldest first: ids and labels, never hashes."""
        self.get_collection(collection)
        query = select(TokenRow).where(TokenRow.collection == collection).order_by(TokenRow.id)
        with self._read() as session:
            rows = session.scalars(query).all()
        return [
            TokenInfo(id=r.id, collection=r.collection, created_at=r.created_at, label=r.label) for r in rows
        ]

    def revoke_token(self, collection: str, token_id: int) -> str:
        """Delete one of the collection's tokens; its hash, so that caches can
        forget it. NotFoundError when the collection has no such token."""
        query = select(TokenRow).where(TokenRow.collection == collection, TokenRow.id == token_id)
        with self._write() as session:
            row = session.scalar(query)
            if row is None:
                raise NotFoundError(f"collection {collection!r} has no token {token_id}: list its tokens")
            token_hash = row.token_hash
            session.delete(row)
        return token_hash

    def collection_for_token_hash(self, token_hash: str) -> str | None:
        """The collection a token belongs to; None for an unknown token."""
        query = select(TokenRow.collection).where(TokenRow.token_hash == token_hash)
        with self._read() as session:
            return session.scalar(query)

    def put_task(
        self, collection: str, name: str, definition: dict[str, Any], description: str | None = None
    ) -> StoredTask:
        """Create or replace a task's definition (created_at is kept on replace;
        so is the description when `description` is None)."""
        now = utcnow()
        statement = self._insert(TaskRow).values(
            collection=collection, name=name, definition=definition, created_at=now, updated_at=now,
            description=description or "",
        )  # fmt: skip
        changes: dict[str, Any] = {"definition": definition, "updated_at": now}
        if description is not None:
            changes["description"] = description
        statement = statement.on_conflict_do_update(
            index_elements=[TaskRow.collection, TaskRow.name], set_=changes
        )
        with self._write() as session:
            session.execute(statement)
        return self.get_task(collection, name)

    def get_task(self, collection: str, name: str) -> StoredTask:
        with self._read() as session:
            row = session.get(TaskRow, (collection, name))
        if row is None:
            raise NotFoundError(f"task {name!r} not found in collection {collection!r}")
        return _task(row)

    def delete_task(self, collection: str, name: str) -> None:
        """Remove a stored task; its runs stay. NotFoundError when there is none."""
        statement = delete(TaskRow).where(TaskRow.collection == collection, TaskRow.name == name)
        with self._write() as session:
            result = cast(CursorResult[Any], session.execute(statement))
            if result.rowcount == 0:
                raise NotFoundError(f"task {name!r} not found in collection {collection!r}")

    def list_tasks(self, collection: str) -> list[StoredTask]:
        query = select(TaskRow).where(TaskRow.collection == collection).order_by(TaskRow.name)
        with self._read() as session:
            return [_task(row) for row in session.scalars(query)]

    def set_env(self, collection: str, name: str, value_encrypted: str) -> None:
        """Create or replace one environment variable (already encrypted)."""
        now = utcnow()
        statement = self._insert(CollectionEnvRow).values(
            collection=collection, name=name, value_encrypted=value_encrypted, updated_at=now
        )
        statement = statement.on_conflict_do_update(
            index_elements=[CollectionEnvRow.collection, CollectionEnvRow.name],
            set_={"value_encrypted": value_encrypted, "updated_at": now},
        )
        with self._write() as session:
            session.execute(statement)

    def delete_env(self, collection: str, name: str) -> bool:
        """Remove one variable; False when it was not set."""
        statement = delete(CollectionEnvRow).where(
            CollectionEnvRow.collection == collection, CollectionEnvRow.name == name
        )
        with self._write() as session:
            result = cast(CursorResult[Any], session.execute(statement))
            return result.rowcount > 0

    def get_env_encrypted(self, collection: str) -> dict[str, str]:
        """Every variable of the collection: name -> encrypted value."""
        query = select(CollectionEnvRow.name, CollectionEnvRow.value_encrypted).where(
            CollectionEnvRow.collection == collection
        )
        with self._read() as session:
            return {name: value for name, value in session.execute(query)}

    def list_env_names(self, collection: str) -> list[str]:
        query = (
            select(CollectionEnvRow.name)
            .where(CollectionEnvRow.collection == collection)
            .order_by(CollectionEnvRow.name)
        )
        with self._read() as session:
            return list(session.scalars(query))
