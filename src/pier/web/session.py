"""Signing in to the web UI: the token (a collection's or the admin's) is kept
in an HttpOnly, SameSite=Lax cookie (so a deep link from elsewhere opens signed in), Secure over HTTPS (or behind TLS, see
PIER_WEB_BEHIND_TLS). Every form POST carries a CSRF token derived from the
session's token, which a page of another site can neither read nor compute."""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, Request
from fastapi.responses import Response

from pier.server.auth import SESSION_COOKIE, Caller, caller_for_token
from pier.server.state import ApiState

CSRF_FIELD = "csrf"
SESSION_MAX_AGE = 14 * 24 * 3600


def get_state(request: Request) -> ApiState:
    return request.app.state.pier  # where the API's lifespan keeps it (pier.api.app)


# What a page (or a dependency) takes to reach the server's shared state.
StateDep = Annotated[ApiState, Depends(get_state)]


class SignInRequired(Exception):
    """The page needs a signed-in caller: the handler sends the browser to /signin."""

    def __init__(self, next_url: str):
        self.next_url = next_url


class CsrfRejected(Exception):
    """A form POST without this session's CSRF token."""


def csrf_token(token: str) -> str:
    """The session's CSRF token: a keyed hash of its (secret) sign-in token."""
    return hmac.new(token.encode(), b"pier-web-csrf", hashlib.sha256).hexdigest()


def sign_in_url(request: Request) -> str:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return f"/signin?next={quote(target, safe='')}"


async def page_caller(request: Request, state: StateDep) -> Caller:
    """The signed-in caller, or a redirect to the sign-in page."""
    token = request.cookies.get(SESSION_COOKIE)
    caller = await caller_for_token(state, token) if token else None
    if caller is None:
        raise SignInRequired(sign_in_url(request))
    request.state.csrf = csrf_token(token or "")
    request.state.caller = caller
    return caller


async def checked_form(request: Request, caller: Annotated[Caller, Depends(page_caller)]) -> Caller:
    """page_caller for a form POST whose CSRF field matches the session's."""
    form = await request.form()
    sent = str(form.get(CSRF_FIELD) or "")
    if not hmac.compare_digest(sent, request.state.csrf):
        raise CsrfRejected()
    return caller


def set_session(request: Request, response: Response, token: str, behind_tls: bool) -> None:
    """`behind_tls` (PIER_WEB_BEHIND_TLS): a proxy in front speaks HTTPS, so the
    cookie is Secure although this server sees plain HTTP."""
    secure = request.url.scheme == "https" or behind_tls
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=secure,
        path="/",
    )


def clear_session(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax")


PageCaller = Annotated[Caller, Depends(page_caller)]
FormCaller = Annotated[Caller, Depends(checked_form)]
