"""Who is calling: a collection token grants its own collection; the admin token
(PIER_ADMIN_TOKEN) manages collections and may act on any of them."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from pier.api.errors import ApiError
from pier.server.state import ApiState, StateDep
from pier.server.tokens import hash_token

bearer = HTTPBearer(auto_error=False, description="a collection token, or the admin token")


@dataclass(frozen=True)
class Caller:
    collection: str | None  # None for the admin
    admin: bool = False

    def may_use(self, collection: str) -> bool:
        return self.admin or self.collection == collection

    def check(self, collection: str) -> str:
        """collection, or 403 when this caller may not use it."""
        if not self.may_use(collection):
            raise ApiError(
                403,
                f"this token does not grant collection {collection!r}: use a token of that collection",
            )
        return collection


SESSION_COOKIE = "pier_session"  # the web UI's sign-in: the token itself, HttpOnly
SAFE_METHODS = frozenset({"GET", "HEAD"})


async def caller_for_token(state: ApiState, token: str) -> Caller | None:
    """Who a token is: the admin, a collection, or None when it is unknown."""
    admin = state.settings.admin_token
    if admin is not None and hmac.compare_digest(token.encode(), admin.get_secret_value().encode()):
        return Caller(collection=None, admin=True)
    token_hash = hash_token(token)
    collection = state.tokens.get(token_hash)
    if collection is None:
        collection = await run_in_threadpool(state.store.collection_for_token_hash, token_hash)
        if collection is None:
            return None
        state.tokens.add(token_hash, collection)  # from now, not from its last use: revocation reaches here
    return Caller(collection=collection)


def request_token(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """The bearer token; else, for reads only, the web UI's session cookie (so
    the browser can follow a log, show an image, download a file). Writes need
    the header, which a cross-site page cannot send."""
    if credentials is not None:
        if credentials.scheme.lower() == "bearer" and credentials.credentials:
            return credentials.credentials
        return None
    if request.method in SAFE_METHODS:
        return request.cookies.get(SESSION_COOKIE) or None
    return None


async def authenticate(
    request: Request,
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    token = request_token(request, credentials)
    if token is None:
        raise ApiError(401, "missing bearer token: send `Authorization: Bearer <token>`")
    caller = await caller_for_token(state, token)
    if caller is None:
        raise ApiError(
            401,
            "unknown bearer token: use a token from `pier collection create` (or a new one from the admin)",
        )
    return caller


async def require_admin(caller: Annotated[Caller, Depends(authenticate)]) -> Caller:
    if not caller.admin:
        raise ApiError(403, "this needs the admin token (PIER_ADMIN_TOKEN)")
    return caller


async def collection_access(
    collection: str, state: StateDep, caller: Annotated[Caller, Depends(authenticate)]
) -> str:
    """The path's collection, once the caller may use it (403) and it exists (404;
    a collection token's collection always does)."""
    caller.check(collection)
    if caller.admin:
        await run_in_threadpool(state.store.get_collection, collection)
    return collection


CallerDep = Annotated[Caller, Depends(authenticate)]
AdminDep = Annotated[Caller, Depends(require_admin)]
CollectionDep = Annotated[str, Depends(collection_access)]
