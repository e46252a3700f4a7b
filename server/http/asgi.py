"""The ASGI app the server runs: every HTTP surface under one Starlette router, the tRPC fast paths in front of
it, and a lifespan that opens the services (as the composition root says) and drains before they close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from ..protocol.errors import RpcError
from ..protocol.inputs import url_problem
from ..rpc.context import Services
from ..rpc.http import HttpTransport, plain_error_response, request_error
from ..rpc.registry import Router
from ..settings import Settings
from .admin.api import AdminApi
from .files import file_routes
from .health import health_routes
from .link import link_routes
from .state import AppState
from .transcripts import transcript_routes
from .trpc import RAW_SEND_KEY, TrpcEndpoints
from .web import web_routes


class ChatsyncApp:
    """Outermost ASGI layer, around the Starlette app (``app``) that holds every route. It remembers the
    server's own ``send`` for WebSockets, before middleware wraps it, so a connection can reach the transport
    (``rpc/uvicorn_ws.py``).

    The tRPC WebSocket and tRPC ``GET``s (queries and SSE subscriptions) go straight to their endpoints, past
    Starlette's middleware and router: their coroutine frames would stay suspended for the whole life of every
    WebSocket and SSE stream (about 4 KiB each, a fifth of what an idle connection costs), and none of them
    acts on what these endpoints answer (they map every error themselves; uvicorn answers 500 for a bug).

    ``open_services`` opens the services for the app's lifespan; ``state`` (an :class:`~.state.AppState`) holds
    them and the tRPC HTTP transport while it runs."""

    def __init__(
        self,
        settings: Settings,
        router: Router,
        open_services: Callable[[], AbstractAsyncContextManager[Services]],
        *,
        drain_seconds: float,
    ) -> None:
        self.settings = settings
        self.router = router
        self.open_services = open_services
        self.drain_seconds = drain_seconds
        self.state = AppState()
        self.trpc = TrpcEndpoints(router, settings, self.state)
        self.app = Starlette(routes=self.routes(self.state), lifespan=self.lifespan)

    def routes(self, state: AppState) -> list[BaseRoute]:
        services = state.require_services
        return [
            WebSocketRoute("/trpc", self.trpc.websocket),
            Route("/trpc/{path:path}", self.trpc.http, methods=["GET", "POST", "HEAD"]),
            *link_routes(services, self.settings),
            *file_routes(services),
            *transcript_routes(services, self.settings),
            *health_routes(state),
            *AdminApi(state).routes(),
            *web_routes(self.settings),  # last: the web app answers paths nothing above claimed
        ]

    @asynccontextmanager
    async def lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        state = self.state
        async with self.open_services() as services:
            state.services = services
            state.http = HttpTransport(self.router, services)
            try:
                yield
            finally:
                await self.drain()
                state.services = None

    async def drain(self) -> None:
        """Graceful shutdown, callable before the server closes sockets (``serve.ChatsyncServer``): tell every
        client to reconnect and let buffers drain, for at most ``drain_seconds``. Idempotent."""
        state = self.state
        if state.services is None or state.drained:
            return
        state.drained = True
        services = state.services
        state.require_http().shutdown()
        if services.connections:
            await asyncio.gather(
                *(c.shutdown(self.drain_seconds) for c in list(services.connections)), return_exceptions=True
            )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            problem = url_problem(scope["path"], scope["query_string"])
            if problem is not None:
                await self._refuse(scope, receive, send, problem)
                return
        if scope["type"] == "websocket":
            scope[RAW_SEND_KEY] = send
            if scope["path"] == scope.get("root_path", "") + "/trpc":
                scope["app"] = self.app
                await self.trpc.websocket(WebSocket(scope, receive, send))
                return
        elif scope["type"] == "http" and scope["method"] == "GET":
            prefix = scope.get("root_path", "") + "/trpc/"
            if scope["path"].startswith(prefix):
                scope["app"] = self.app
                scope["path_params"] = {"path": scope["path"][len(prefix) :]}
                response = await self.trpc.http(Request(scope, receive))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Any, receive: Any, send: Any, problem: str) -> None:
        """``BAD_REQUEST`` for a URL no route may see (``protocol.inputs.url_problem``): in tRPC's shape under
        ``/trpc/``, the plain one elsewhere; a WebSocket upgrade is refused (403)."""
        if scope["type"] == "websocket":
            await WebSocket(scope, receive, send).close(code=1008)
            return
        err = RpcError("BAD_REQUEST", problem)
        trpc = scope["path"].startswith(scope.get("root_path", "") + "/trpc/")
        response = request_error(err) if trpc else plain_error_response(err, headers={"cache-control": "no-store"})
        await response(scope, receive, send)
