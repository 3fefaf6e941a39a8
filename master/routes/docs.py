"""``GET /docs`` (Swagger UI), ``GET /redoc`` (ReDoc) and the favicon, served offline.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so they are blank on a machine
without internet. Here the pages reference only the master's URLs: the scripts and styles
come from the ``fastapi-offline`` package (``/docs-assets/``), ReDoc is told not to load
Google Fonts, and the favicon (``/favicon.svg``, also at ``/favicon.ico``) is the master's own.
Every path is public, like the OpenAPI document it renders.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from master.access import Permission
from master.access.permissions import mark
from master.deps import needs

ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
"""``swagger-ui-bundle.js``, ``swagger-ui.css`` and ``redoc.standalone.js``."""
ASSETS_PATH = "/docs-assets"
FAVICON_PATH = "/favicon.svg"

FAVICON = """<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64">\
<rect width="64" height="64" rx="14" fill="#1f2a44"/>\
<circle cx="32" cy="32" r="9" fill="#7cc4ff"/>\
<g stroke="#7cc4ff" stroke-width="4" stroke-linecap="round">\
<line x1="32" y1="23" x2="32" y2="10"/><line x1="40" y1="37" x2="51" y2="44"/>\
<line x1="24" y1="37" x2="13" y2="44"/></g>\
<g fill="#ffd166"><circle cx="32" cy="9" r="5"/><circle cx="53" cy="45" r="5"/>\
<circle cx="11" cy="45" r="5"/></g></svg>
"""
"""The hub and three agents: the web UI, /docs and /redoc all show it."""


def install_docs(app: FastAPI) -> None:
    """Add the offline docs pages and the favicon to an app built with ``docs_url=None, redoc_url=None``."""
    openapi_url = app.openapi_url or "/openapi.json"
    title = f"{app.title} - API docs"
    oauth2_redirect = "/docs/oauth2-redirect"
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS), name="docs-assets")
    # Open even with keys: they describe the routes, reveal no data (master.access.permissions).
    mark(app.routes[-1], Permission.OPEN)
    for route in app.routes:
        if getattr(route, "path", None) == openapi_url:
            mark(route, Permission.OPEN)

    @app.get("/docs", include_in_schema=False, dependencies=needs(Permission.OPEN))
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            oauth2_redirect_url=oauth2_redirect,
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=FAVICON_PATH,
        )

    @app.get(oauth2_redirect, include_in_schema=False, dependencies=needs(Permission.OPEN))
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False, dependencies=needs(Permission.OPEN))
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=title,
            redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=FAVICON_PATH,
            with_google_fonts=False,
        )

    @app.get(FAVICON_PATH, include_in_schema=False, dependencies=needs(Permission.OPEN))
    @app.get("/favicon.ico", include_in_schema=False, dependencies=needs(Permission.OPEN))
    async def favicon() -> Response:
        return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})
