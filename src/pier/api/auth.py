"""Who is calling, read from a request: the bearer token, or for reads the web
UI's session cookie (who a token is: `pier.server.auth`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pier.api.errors import ApiError
from pier.api.state import StateDep
from pier.server import auth
from pier.server.auth import SESSION_COOKIE, Caller, caller_for_token

bearer = HTTPBearer(auto_error=False, description="a collection token, or the admin token")

SAFE_METHODS = frozenset({"GET", "HEAD"})


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
    return await auth.require_admin(caller)


async def collection_access(
    collection: str, state: StateDep, caller: Annotated[Caller, Depends(authenticate)]
) -> str:
    """The path's collection, once the caller may use it (403) and it exists (404;
    a collection token's collection always does)."""
    return await auth.collection_access(collection, state, caller)


CallerDep = Annotated[Caller, Depends(authenticate)]
AdminDep = Annotated[Caller, Depends(require_admin)]
CollectionDep = Annotated[str, Depends(collection_access)]
