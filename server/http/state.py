"""What a running :class:`~server.http.asgi.ChatsyncApp` holds: its lifespan sets it, its routes read it."""

from __future__ import annotations

from dataclasses import dataclass

from ..rpc.context import Services
from ..rpc.http import HttpTransport


@dataclass
class AppState:
    """``services`` and ``http`` (the tRPC HTTP transport) are set once the lifespan has opened the services,
    and ``services`` is None again once they closed; ``drained`` is set when the app starts draining."""

    services: Services | None = None
    http: HttpTransport | None = None
    drained: bool = False

    def require_services(self) -> Services:
        """The services, for a route that only serves while the app runs (the server routes no request before
        the lifespan has started, so None here is a bug)."""
        if self.services is None:
            raise RuntimeError("the app's services are not open")
        return self.services

    def require_http(self) -> HttpTransport:
        """The tRPC HTTP transport, set with the services (see :meth:`require_services`)."""
        if self.http is None:
            raise RuntimeError("the app's services are not open")
        return self.http
