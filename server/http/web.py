"""The web app, served at ``/`` from the files Vite built (``client_js/app`` → ``server/web/dist``).

The build runs at setup (``scripts/setup.sh``), never at request time, and its output is not committed, so
a checkout that was never set up has no ``dist``: ``/`` then answers 503 with the command that builds it.
Whether the build exists is checked per request, so building while the server runs needs no restart.

Caching follows from Vite's file names: everything under ``/assets/`` carries a content hash in its name and
is cached for a year as immutable; ``index.html`` names the current hashes and is never stored, so a new
build reaches every tab at its next load. The HTML carries a strict Content-Security-Policy: scripts,
styles and images from this origin only (the build inlines nothing) — images also from ``blob:``, the
attachments the app fetched with its token —, connections to this origin and its WebSocket, no plugins, no
``<base>``, no framing.

Only the app's own client-side routes return ``index.html``; every other path is left to the routes before
these (``/trpc``, ``/admin``, ``/auth/…``, health and metrics), which ``app.py`` registers first.
"""

from __future__ import annotations

import re
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from ..settings import Settings

DIST = Path(__file__).resolve().parents[1] / "web" / "dist"

IMMUTABLE = "public, max-age=31536000, immutable"
# Files Vite copies from app/public keep their names (favicon), so they may change under the same URL.
SHORT = "public, max-age=3600"
NO_STORE = "no-store"

# A Host header is what the browser connected to; anything else (spaces, quotes, semicolons) could bend the
# policy, so such a value only loses the explicit ws:/wss: sources ('self' still covers this origin).
_HOST = re.compile(r"^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")

NOT_BUILT = (
    "The chatsync web app has not been built.\n\n"
    "Build it with\n\n    bash scripts/setup.sh\n\n"
    "(or by hand: cd client_js && npm ci && npx vite build), then reload this page.\n"
    "The server itself is running: its API is at /trpc, the admin page at /admin.\n"
)

COMMON_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def content_security_policy(host: str | None) -> str:
    connect = "'self'"
    if host and _HOST.match(host):
        connect += f" ws://{host} wss://{host}"
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            # blob: only: the app shows image attachments it fetched with the token as blob: URLs of its own.
            "img-src 'self' blob:",
            "font-src 'self'",
            f"connect-src {connect}",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


def _inside(root: Path, relative: str) -> Path | None:
    """The file ``relative`` names under ``root``, or None when it is missing or would leave ``root``."""
    try:
        path = (root / relative).resolve()
    except (OSError, ValueError):
        return None
    if root.resolve() not in path.parents or not path.is_file():
        return None
    return path


def _not_found() -> Response:
    return PlainTextResponse("Not found\n", status_code=404, headers={**COMMON_HEADERS, "Cache-Control": NO_STORE})


class WebApp:
    """The request handlers; ``dist`` is a parameter so tests can serve a build of their own."""

    def __init__(self, dist: Path = DIST) -> None:
        self.dist = dist

    async def index(self, request: Request) -> Response:
        page = self.dist / "index.html"
        if not page.is_file():
            return PlainTextResponse(NOT_BUILT, status_code=503, headers={**COMMON_HEADERS, "Cache-Control": NO_STORE})
        return FileResponse(
            page,
            media_type="text/html; charset=utf-8",
            headers={
                **COMMON_HEADERS,
                "Cache-Control": NO_STORE,
                "Content-Security-Policy": content_security_policy(request.headers.get("host")),
            },
        )

    async def asset(self, request: Request) -> Response:
        path = _inside(self.dist / "assets", request.path_params["path"])
        if path is None:
            return _not_found()
        return FileResponse(path, headers={**COMMON_HEADERS, "Cache-Control": IMMUTABLE})

    async def public_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        path = None if name == "index.html" else _inside(self.dist, name)
        if path is None:
            return _not_found()
        return FileResponse(path, headers={**COMMON_HEADERS, "Cache-Control": SHORT})

    def routes(self) -> list[BaseRoute]:
        methods = ["GET", "HEAD"]
        return [
            Route("/", self.index, methods=methods),
            # The app's own client-side routes: a reload or a pasted address lands on the app.
            Route("/link", self.index, methods=methods),
            Route("/devices", self.index, methods=methods),
            Route("/s/{session_id}", self.index, methods=methods),
            Route("/assets/{path:path}", self.asset, methods=methods),
            # Top-level files copied from app/public (favicon.svg): a name with a dot, never a directory.
            Route("/{name:str}", self.public_file, methods=methods),
        ]


def web_routes(settings: Settings) -> list[BaseRoute]:
    """Routes serving the built web app; registered after every other route (``app.py``)."""
    return WebApp().routes()
