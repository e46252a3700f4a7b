"""The web app, served at ``/`` from the files Vite built (``client_js/app`` → ``server/web/dist``)."""
from __future__ import annotations

from starlette.routing import BaseRoute

from .settings import Settings


def web_routes(settings: Settings) -> list[BaseRoute]:
    """Routes serving the built web app; empty while there is nothing built."""
    return []
