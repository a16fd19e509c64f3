"""/docs (Swagger UI) and /redoc from files shipped in a package
(fastapi-offline's copies of swagger-ui and ReDoc), never from a CDN: the pages
work on a machine with no internet, and load nothing from a third party."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs-assets"
# The pages may load only from this server: ReDoc's own footer logo is on
# cdn.redoc.ly, which a browser then never asks. Their inline start-up
# scripts and styles, ReDoc's blob: workers and data: images stay allowed.
POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' blob:; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; worker-src 'self' blob:; connect-src 'self'; font-src 'self' data:"
)


def _here_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    return page


def install(app: FastAPI) -> None:
    """Serve the two docs pages and their assets (app made with docs_url=None, redoc_url=None)."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
    openapi = str(app.openapi_url)

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        return _here_only(
            get_swagger_ui_html(
                openapi_url=openapi,
                title=f"{app.title} - API",
                oauth2_redirect_url="/docs/oauth2-redirect",
                swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
                swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
                swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
            )
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    def swagger_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return _here_only(
            get_redoc_html(
                openapi_url=openapi,
                title=f"{app.title} - API",
                redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
                redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
                with_google_fonts=False,
            )
        )
