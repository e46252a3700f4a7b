"""The tRPC endpoints: the WebSocket at ``/trpc`` (its upgrade checked here: connection slots, the page's origin,
the token) and the HTTP transport under ``/trpc/``, both serving the running app's procedures."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from ..domain import close_codes
from ..rpc.http import bearer_token
from ..rpc.registry import Router
from ..rpc.sse import SseResponse
from ..rpc.ws import WsConnection
from ..settings import Settings
from .origins import origin_allowed
from .state import AppState

log = logging.getLogger("chatsync")

# Where the outermost ASGI layer (``asgi.ChatsyncApp``) leaves the server's own ``send`` for a WebSocket.
RAW_SEND_KEY = "chatsync.raw_send"


class TrpcEndpoints:
    """The tRPC endpoints of the running app, whose ``state`` holds the services and the HTTP transport."""

    def __init__(self, router: Router, settings: Settings, state: AppState) -> None:
        self.router = router
        self.settings = settings
        self.state = state

    async def websocket(self, websocket: WebSocket) -> None:
        services = self.state.require_services()
        if not services.slots.take():
            # Accepted, then closed: a client sees the code (a refused upgrade would reach it as a bare 1006).
            await websocket.accept()
            await websocket.close(code=close_codes.SERVER_FULL)
            return
        try:
            if not origin_allowed(self.settings, websocket.headers.get("origin"), websocket.headers.get("host")):
                await websocket.close(code=1008)  # before accept: the upgrade is refused with 403
                return
            principal = None
            token = bearer_token(websocket)
            if token is not None:
                try:
                    principal = await services.auth.identify(token)
                except Exception:
                    log.warning("could not check a token on upgrade", exc_info=True)
                    await websocket.close(code=1013)  # before accept: refused; "try again later"
                    return
                if principal is None:
                    await websocket.close(code=1008)
                    return
            raw_send = websocket.scope.get(RAW_SEND_KEY)
            await WsConnection(websocket, self.router, services, services.connections, raw_send).serve(principal)
        finally:
            services.slots.release()

    async def http(self, request: Request) -> Response | SseResponse:
        return await self.state.require_http()(request)
