"""Rendering pages (Jinja2, autoescaped) with the headers every page gets, and
errors on page routes as pages: the API's own messages, shown as HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from pier.web import views

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.globals |= {"markdown": views.markdown, "duration": views.duration, "when": views.when,
                          "pretty": views.pretty, "runbook": views.runbook_view, "money": views.money,
                          "usage_rows": views.usage_rows}  # fmt: skip

# Scripts and styles only from this server; no inline script; images also as data: URLs.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
# The OpenAI-compatible endpoint (/v1/chat/completions, /chat/completions) is
# the API's too: its client reads JSON errors, and a 401 is no sign-in page.
API_PREFIXES = (
    "/api/",
    "/health",
    "/docs",
    "/redoc",
    "/openapi.json",
    "/metrics",
    "/v1/",
    "/chat/completions",
)


def page(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> HTMLResponse:
    caller = getattr(request.state, "caller", None)
    return templates.TemplateResponse(
        request,
        name,
        {"csrf": getattr(request.state, "csrf", ""), "caller": caller, **context},
        status_code=status_code,
        headers=PAGE_HEADERS,
    )


def is_page(request: Request) -> bool:
    return not request.url.path.startswith(API_PREFIXES)


def html_errors(app: FastAPI) -> None:
    """Wrap the API's error handlers: on a page route, their JSON becomes an
    error page with the same status and message (401 sends to sign-in)."""
    for kind, handler in list(app.exception_handlers.items()):
        app.exception_handlers[kind] = _as_page(handler)


def _as_page(handler: Any) -> Any:
    async def handle(request: Request, exc: Exception) -> Response:
        response = await handler(request, exc)
        if not is_page(request):
            return response
        if response.status_code == 401:
            from pier.web.session import sign_in_url

            return RedirectResponse(sign_in_url(request), status_code=303)
        try:
            body = json.loads(bytes(response.body))
        except ValueError:
            body = {}
        context = {"status": response.status_code, "detail": body.get("detail") or "something went wrong",
                   "errors": body.get("errors") or []}  # fmt: skip
        shown = page(request, "error.html", context, status_code=response.status_code)
        if "retry-after" in response.headers:  # a 503 (the database is down) or a 429: when to try again
            shown.headers["Retry-After"] = response.headers["retry-after"]
        return shown

    return handle
