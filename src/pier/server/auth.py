"""Who is calling, knowing no HTTP: a collection token grants its own
collection; the admin token (PIER_ADMIN_TOKEN) manages collections and may act
on any of them. `pier.api.auth` reads the token from a request."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from anyio.to_thread import run_sync

from pier.server.errors import ServiceError
from pier.server.state import ApiState
from pier.server.tokens import hash_token


@dataclass(frozen=True)
class Caller:
    collection: str | None  # None for the admin
    admin: bool = False

    def may_use(self, collection: str) -> bool:
        return self.admin or self.collection == collection

    def check(self, collection: str) -> str:
        """collection, or 403 when this caller may not use it."""
        if not self.may_use(collection):
            raise ServiceError(
                403,
                f"this token does not grant collection {collection!r}: use a token of that collection",
            )
        return collection


SESSION_COOKIE = "pier_session"  # the web UI's sign-in: the token itself, HttpOnly


async def caller_for_token(state: ApiState, token: str) -> Caller | None:
    """Who a token is: the admin, a collection, or None when it is unknown."""
    admin = state.settings.admin_token
    if admin is not None and hmac.compare_digest(token.encode(), admin.get_secret_value().encode()):
        return Caller(collection=None, admin=True)
    token_hash = hash_token(token)
    collection = state.tokens.get(token_hash)
    if collection is None:
        collection = await run_sync(state.store.collection_for_token_hash, token_hash)
        if collection is None:
            return None
        state.tokens.add(token_hash, collection)  # from now, not from its last use: revocation reaches here
    return Caller(collection=collection)


async def require_admin(caller: Caller) -> Caller:
    if not caller.admin:
        raise ServiceError(403, "this needs the admin token (PIER_ADMIN_TOKEN)")
    return caller


async def collection_access(collection: str, state: ApiState, caller: Caller) -> str:
    """The collection, once the caller may use it (403) and it exists (404;
    a collection token's collection always does)."""
    caller.check(collection)
    if caller.admin:
        await run_sync(state.store.get_collection, collection)
    return collection
