"""Collections and what hangs off them: API tokens, stored tasks, environment.

Storage only: token hashing and secret encryption belong to the caller.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, delete, insert, select
from sqlalchemy.exc import IntegrityError

from pier.db.base import StoreBase
from pier.db.schemas import Collection, StoredTask, TokenInfo
from pier.db.tables import collection_env, collections, tasks, tokens
from pier.errors import InputError, NotFoundError
from pier.record import utcnow


def _collection(row: Row[Any]) -> Collection:
    return Collection(name=row.name, created_at=row.created_at)


def _task(row: Row[Any]) -> StoredTask:
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
        statement = self._insert(collections).values(name=name, created_at=utcnow())
        with self._write() as connection:
            connection.execute(statement.on_conflict_do_nothing(index_elements=[collections.c.name]))
        return self.get_collection(name)

    def get_collection(self, name: str) -> Collection:
        with self._read() as connection:
            row = connection.execute(select(collections).where(collections.c.name == name)).first()
        if row is None:
            raise NotFoundError(f"collection {name!r} not found: create it first")
        return _collection(row)

    def list_collections(self) -> list[Collection]:
        with self._read() as connection:
            rows = connection.execute(select(collections).order_by(collections.c.name)).all()
        return [_collection(row) for row in rows]

    def add_token(self, collection: str, token_hash: str, label: str | None = None) -> int:
        """Register a token (by its hash) for an existing collection; returns its id."""
        self.get_collection(collection)
        statement = insert(tokens).values(
            collection=collection, token_hash=token_hash, created_at=utcnow(), label=label
        )
        try:
            with self._write() as connection:
                return int(connection.execute(statement.returning(tokens.c.id)).scalar_one())
        except IntegrityError:
            raise InputError("that token is already registered: issue a new one") from None

    def list_tokens(self, collection: str) -> list[TokenInfo]:
        """The collection's tokens, oldest first: ids and labels, never hashes."""
        self.get_collection(collection)
        query = select(tokens).where(tokens.c.collection == collection).order_by(tokens.c.id)
        with self._read() as connection:
            rows = connection.execute(query).all()
        return [
            TokenInfo(id=r.id, collection=r.collection, created_at=r.created_at, label=r.label) for r in rows
        ]

    def revoke_token(self, collection: str, token_id: int) -> str:
        """Delete one of the collection's tokens; its hash, so that caches can
        forget it. NotFoundError when the collection has no such token."""
        mine = (tokens.c.collection == collection) & (tokens.c.id == token_id)
        with self._write() as connection:
            token_hash = connection.scalar(select(tokens.c.token_hash).where(mine))
            if token_hash is None:
                raise NotFoundError(f"collection {collection!r} has no token {token_id}: list its tokens")
            connection.execute(delete(tokens).where(mine))
        return str(token_hash)

    def collection_for_token_hash(self, token_hash: str) -> str | None:
        """The collection a token belongs to; None for an unknown token."""
        query = select(tokens.c.collection).where(tokens.c.token_hash == token_hash)
        with self._read() as connection:
            return connection.scalar(query)

    def put_task(
        self, collection: str, name: str, definition: dict[str, Any], description: str | None = None
    ) -> StoredTask:
        """Create or replace a task's definition (created_at is kept on replace;
        so is the description when `description` is None)."""
        now = utcnow()
        statement = self._insert(tasks).values(
            collection=collection, name=name, definition=definition, created_at=now, updated_at=now,
            description=description or "",
        )  # fmt: skip
        changes: dict[str, Any] = {"definition": definition, "updated_at": now}
        if description is not None:
            changes["description"] = description
        statement = statement.on_conflict_do_update(
            index_elements=[tasks.c.collection, tasks.c.name], set_=changes
        )
        with self._write() as connection:
            connection.execute(statement)
        return self.get_task(collection, name)

    def get_task(self, collection: str, name: str) -> StoredTask:
        query = select(tasks).where(tasks.c.collection == collection, tasks.c.name == name)
        with self._read() as connection:
            row = connection.execute(query).first()
        if row is None:
            raise NotFoundError(f"task {name!r} not found in collection {collection!r}")
        return _task(row)

    def delete_task(self, collection: str, name: str) -> None:
        """Remove a stored task; its runs stay. NotFoundError when there is none."""
        statement = delete(tasks).where(tasks.c.collection == collection, tasks.c.name == name)
        with self._write() as connection:
            if connection.execute(statement).rowcount == 0:
                raise NotFoundError(f"task {name!r} not found in collection {collection!r}")

    def list_tasks(self, collection: str) -> list[StoredTask]:
        query = select(tasks).where(tasks.c.collection == collection).order_by(tasks.c.name)
        with self._read() as connection:
            return [_task(row) for row in connection.execute(query)]

    def set_env(self, collection: str, name: str, value_encrypted: str) -> None:
        """Create or replace one environment variable (already encrypted)."""
        now = utcnow()
        statement = self._insert(collection_env).values(
            collection=collection, name=name, value_encrypted=value_encrypted, updated_at=now
        )
        statement = statement.on_conflict_do_update(
            index_elements=[collection_env.c.collection, collection_env.c.name],
            set_={"value_encrypted": value_encrypted, "updated_at": now},
        )
        with self._write() as connection:
            connection.execute(statement)

    def delete_env(self, collection: str, name: str) -> bool:
        """Remove one variable; False when it was not set."""
        statement = delete(collection_env).where(
            collection_env.c.collection == collection, collection_env.c.name == name
        )
        with self._write() as connection:
            return connection.execute(statement).rowcount > 0

    def get_env_encrypted(self, collection: str) -> dict[str, str]:
        """Every variable of the collection: name -> encrypted value."""
        query = select(collection_env.c.name, collection_env.c.value_encrypted).where(
            collection_env.c.collection == collection
        )
        with self._read() as connection:
            return {name: value for name, value in connection.execute(query)}

    def list_env_names(self, collection: str) -> list[str]:
        query = (
            select(collection_env.c.name)
            .where(collection_env.c.collection == collection)
            .order_by(collection_env.c.name)
        )
        with self._read() as connection:
            return list(connection.scalars(query))
