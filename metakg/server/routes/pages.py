"""The pages: the web page, the API reference (Swagger UI and ReDoc from vendored files, readable
without the key) and the served bundle's validation report."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, Response

from metakg import api

#: the web page and its assets (the JavaScript libraries are vendored at build time: tools/vendor_js.sh)
STATIC = Path(__file__).resolve().parent.parent / "static"


def router(bundle: Path | None, openapi_url: str) -> APIRouter:
    """The pages of a server over ``bundle`` (None: Neo4j, which has no validation report)."""
    router = APIRouter()

    def swagger(_request: Request) -> HTMLResponse:
        """The interactive API reference (Swagger UI), from files fetched at build time: it works offline."""
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title="metakg API",
            swagger_js_url="/static/vendor/swagger-ui-bundle.js",
            swagger_css_url="/static/vendor/swagger-ui.css",
            swagger_favicon_url="/static/vendor/swagger-favicon.png",
        )

    def redoc(_request: Request) -> HTMLResponse:
        """The API reference as one page (ReDoc), from files fetched at build time, without web fonts."""
        return get_redoc_html(
            openapi_url=openapi_url,
            title="metakg API",
            redoc_js_url="/static/vendor/redoc.standalone.js",
            redoc_favicon_url="/static/vendor/swagger-favicon.png",
            with_google_fonts=False,
        )

    # as FastAPI serves its own: documentation, readable without the key (the API's routes still need it)
    router.add_route("/docs", swagger, include_in_schema=False)
    router.add_route("/redoc", redoc, include_in_schema=False)

    @router.get("/", include_in_schema=False)
    def page() -> FileResponse:
        """The web page: search, ask, the evidence as an interactive graph."""
        return FileResponse(STATIC / "index.html")

    @router.get("/report", include_in_schema=False)
    def report() -> Response:
        """The served bundle's validation report (``metakg validate``), when it has one: a regular file in the
        bundle's folder (a link, to /etc/passwd say, is not followed)."""
        page = api.validation_page(bundle) if bundle is not None else None
        if page is None:
            raise HTTPException(status_code=404, detail="this graph has no validation report (metakg validate)")
        return Response(page, media_type="text/html")

    return router
