"""pier's web UI, served by `pier serve` at `/`: server-rendered pages over the
API's service layer (pier.server.services), one small script for the live parts,
no build step."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from pier.web.experiments import router as experiment_router
from pier.web.pages import router
from pier.web.render import HERE, html_errors, page
from pier.web.session import CsrfRejected, SignInRequired


async def _sign_in(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    return RedirectResponse(exc.next_url, status_code=303)


async def _csrf(request: Request, _exc: Exception) -> Response:
    detail = "this form is out of date or came from another site: reload the page and send it again"
    return page(request, "error.html", {"status": 403, "detail": detail, "errors": []}, status_code=403)


def install(app: FastAPI) -> None:
    """Add the pages and /static to the app; call after the API's error handlers."""
    html_errors(app)
    app.add_exception_handler(SignInRequired, _sign_in)
    app.add_exception_handler(CsrfRejected, _csrf)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.include_router(router)

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        # Browsers ask for it whatever the page says: the same icon as the pages' link.
        return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")

    app.include_router(experiment_router)
