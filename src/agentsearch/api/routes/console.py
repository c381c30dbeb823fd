"""The web console: one page at ``/`` and its static files under ``/console/``, served by the API itself.

The page is plain HTML, CSS and JavaScript modules in ``src/agentsearch/api/console/`` (no build step). It holds no data
of its own: it signs in with an API key kept in the browser's ``sessionStorage`` and calls the same ``/v1`` routes as
any client, with the key in the ``Authorization`` header (never in a URL), or through single sign-on with a session
cookie (``src/agentsearch/api/routes/sso.py``). Nothing here needs a key: the files hold no user data.

Every answer carries a strict Content-Security-Policy: scripts and styles only from this origin (no inline script or
style, no ``eval``), images and media also from ``blob:``/``data:`` URLs the page makes of artifacts, frames only from
``blob:`` (the PDF report), no plugins, and the page cannot be framed. What docs/console.md says about it.

Usage::

    app.include_router(console.router)      # GET / -> index.html, GET /console/app.js, ...
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from agentsearch.api.errors import not_found

router = APIRouter(include_in_schema=False)

CONSOLE_DIR = Path(__file__).resolve().parents[1] / "console"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' blob: data:",
    "media-src 'self' blob:",
    "frame-src blob:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # The page is small and changes with the code; a stale module next to a fresh one would break it.
    "Cache-Control": "no-cache",
}


def _file(name: str) -> FileResponse:
    # Only files that are in the console's directory itself: no path from the request reaches the filesystem.
    files = {p.name: p for p in CONSOLE_DIR.iterdir() if p.is_file() and p.suffix in CONTENT_TYPES}
    path = files.get(name)
    if path is None:
        raise not_found("file", name)
    return FileResponse(path, media_type=CONTENT_TYPES[path.suffix], headers=HEADERS)


@router.get("/")
def console_page() -> FileResponse:
    return _file("index.html")


@router.get("/console/{name}")
def console_file(name: str) -> FileResponse:
    return _file(name)
