"""Application wiring: ``create_app(settings)`` builds the Starlette app; its lifespan opens and closes
the database, the bus and the hub, in order."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from .api import build_router
from .engine import MemoryPartialTexts, Orchestrator
from .files import Files, create_storage
from .http.admin.api import AdminApi
from .http.files import file_routes
from .http.link import link_routes
from .http.transcripts import transcript_routes
from .http.web import web_routes
from .protocol import close_codes
from .protocol.errors import RpcError
from .protocol.inputs import url_problem
from .pubsub import Bus, create_bus
from .rpc.http import HttpTransport, bearer_token, plain_error_response, request_error
from .rpc.limits import ConnectionSlots, RateLimiter, SharedRateLimiter
from .rpc.ws import WsConnection
from .services.auth import AuthService
from .services.drafts import DraftService
from .services.links import SignInLinks
from .services.presence import PresenceService
from .services.purge import Purger
from .services.push import PushService
from .services.queue import QueueService
from .services.runs import RunAwareSessionService, RunService
from .services.sessions import SessionService
from .services.titles import TitleService
from .services.unread import UnreadService
from .services.uow import UnitOfWork
from .services.versions import VersionService
from .settings import Settings, SettingsError
from .store import migrate
from .store.db import Database
from .sync import revocation
from .sync.hub import Hub
from .tools import ToolRegistry, register_builtins
from .tools.mcp import McpConfigError, McpTools
from .tools.mcp import load as load_mcp

log = logging.getLogger("chatsync")

SHUTDOWN_DRAIN_SECONDS = 5.0


@dataclass
class Services:
    """Everything a procedure may use, built once per process and passed explicitly."""

    settings: Settings
    db: Database
    bus: Bus
    hub: Hub
    uow: UnitOfWork
    auth: AuthService
    links: SignInLinks
    sessions: SessionService
    queue: QueueService
    tools: ToolRegistry
    mcp: McpTools
    orchestrator: Orchestrator
    runs: RunService
    versions: VersionService
    titles: TitleService
    files: Files
    devices: revocation.DeviceConnections
    limiter: RateLimiter
    slots: ConnectionSlots
    presence: PresenceService
    drafts: DraftService
    unread: UnreadService
    push: PushService
    connections: set[WsConnection] = field(default_factory=set)

    async def stream_snapshots(self, session_id: str) -> list[dict[str, Any]]:
        """Partial text of the session's live streams, for subscribers that (re)join mid-stream."""
        return await self.orchestrator.stream_snapshots(session_id)


@asynccontextmanager
async def open_services(settings: Settings) -> AsyncIterator[Services]:
    async with AsyncExitStack() as stack:
        db = await stack.enter_async_context(
            Database(settings.database_url, pool_timeout=settings.db_pool_timeout_seconds)
        )
        if settings.run_migrations_on_start:
            await migrate.upgrade(db)
        bus = await stack.enter_async_context(create_bus(settings.bus_url))
        hub = Hub(bus)
        devices = revocation.DeviceConnections(db, bus)
        hub.channel_handlers[revocation.CHANNEL] = devices.on_bus
        await devices.start()
        stack.push_async_callback(devices.stop)
        uow = UnitOfWork(db, bus, settings.event_retention, max_active_runs=settings.max_active_runs_per_user)
        uow.max_request_records = settings.max_request_records_per_user
        files = await stack.enter_async_context(Files(db, create_storage(settings, db), settings))
        await stack.enter_async_context(Purger(db, files, settings))
        tools = ToolRegistry()
        register_builtins(tools)
        try:
            mcp = load_mcp(settings)
        except McpConfigError as exc:
            raise SettingsError(f"invalid configuration: CHATSYNC_MCP_SERVERS: {exc}") from None
        stack.push_async_callback(mcp.close)  # after the runs are written down (the orchestrator closes first)
        # Entered after the bus and the database, so it is closed (runs written down) before them.
        orchestrator = await stack.enter_async_context(
            Orchestrator(settings, db, uow, bus, tools, MemoryPartialTexts(), files=files, mcp=mcp)
        )
        queue = QueueService(
            uow,
            max_length=settings.max_queue_length,
            max_content_chars=settings.max_content_chars,
            dispatch=orchestrator.dispatch,
        )
        runs = RunService(
            uow,
            orchestrator,
            queue=queue,
            run_lease_seconds=settings.run_lease_seconds,
            max_content_chars=settings.max_content_chars,
        )
        sessions = RunAwareSessionService(db, uow, runs=runs, titles=orchestrator.titles)
        sessions.default_provider, sessions.default_model = settings.default_provider, settings.default_model
        sessions.max_per_user = settings.max_sessions_per_user
        sessions.search_scan = settings.search_scan_sessions
        unread = UnreadService(db, uow)
        presence = PresenceService(db, bus, hub, bus.presence(), unread, settings.presence_ttl_seconds)
        uow.visible = presence.visible
        await presence.start()
        stack.push_async_callback(presence.stop)

        async def approve(user: Any, session_id: str, call_id: str, approved: bool, device_name: str | None) -> Any:
            return await runs.approve(user, session_id, call_id, approved, None, None, device_name)

        push = PushService(db, settings, approve)
        await push.start()
        stack.push_async_callback(push.stop)
        uow.observers.append(push.observe)
        auth = AuthService(db, on_revoked=devices.revoked)
        devices.listeners.append(auth.forget_devices)  # revocations seen on the bus or by a poll evict tokens
        stack.push_async_callback(auth.flush_touches)  # before the database closes
        yield Services(
            settings=settings,
            db=db,
            bus=bus,
            hub=hub,
            uow=uow,
            auth=auth,
            links=SignInLinks(db),
            devices=devices,
            limiter=rate_limiter(settings, bus),
            slots=ConnectionSlots(settings.max_connections),
            sessions=sessions,
            queue=queue,
            tools=tools,
            mcp=mcp,
            orchestrator=orchestrator,
            runs=runs,
            versions=VersionService(runs),
            titles=orchestrator.titles,
            files=files,
            presence=presence,
            drafts=DraftService(db, bus, presence, settings.max_content_chars),
            unread=unread,
            push=push,
        )


def rate_limiter(settings: Settings, bus: Bus) -> RateLimiter:
    """The per-user mutation limit: in buckets every replica shares when the bus has them (Redis), else (and
    while they cannot be reached) in this process's own."""
    shared = bus.rate_buckets()
    if shared is None:
        return RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)
    return SharedRateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst, shared)


def origin_allowed(settings: Settings, origin: str | None, host: str | None) -> bool:
    """Non-browser clients send no Origin; browsers must come from an allowed origin or this server itself.

    "This server itself" never means "whatever the Host header says": with DNS rebinding, a page of
    ``evil.example`` whose name now resolves to this machine sends ``Origin`` and ``Host`` that agree. So a
    page of the server's own is recognised by ``CHATSYNC_PUBLIC_URL``, or by an origin naming the address the
    browser connected to as an IP literal or ``localhost`` (names an attacker's DNS cannot hand out) — a page
    served under another domain name needs that name in ``CHATSYNC_ALLOWED_ORIGINS``."""
    if origin is None:
        return True
    origin = origin.rstrip("/")
    if "*" in settings.allowed_origins or origin in settings.allowed_origins:
        return True
    if settings.public_url and origin == settings.public_url.rstrip("/"):
        return True
    if host is None:
        return False
    parts = urlsplit(origin)
    return parts.netloc == host and _is_literal_address(parts.hostname or "")


def _is_literal_address(hostname: str) -> bool:
    if hostname == "localhost":
        return True
    try:
        ipaddress.ip_address(hostname)
    except ValueError:
        return False
    return True


def create_app(settings: Settings, *, announce_owner_token: bool = True) -> ChatsyncApp:
    router = build_router()
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_services(settings) as services:
            token = await services.auth.ensure_owner()
            if token is not None and announce_owner_token:
                announce_owner(token)
            state["services"] = services
            state["http"] = HttpTransport(router, services)
            try:
                yield
            finally:
                await drain_app(app)
                state.pop("services", None)

    async def ws_endpoint(websocket: WebSocket) -> None:
        services: Services = state["services"]
        if not services.slots.take():
            # Accepted, then closed: a client sees the code (a refused upgrade would reach it as a bare 1006).
            await websocket.accept()
            await websocket.close(code=close_codes.SERVER_FULL)
            return
        try:
            if not origin_allowed(settings, websocket.headers.get("origin"), websocket.headers.get("host")):
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
            await WsConnection(websocket, router, services, services.connections, raw_send).serve(principal)
        finally:
            services.slots.release()

    async def http_endpoint(request: Request) -> Any:
        return await state["http"](request)

    async def healthz(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(_request: Request) -> JSONResponse:
        """Readiness, for a load balancer or Kubernetes (docs/operations.md): 200 when the database answers,
        the bus is connected, the schema is at this code's head (or ahead of it: newer code migrated it) and
        the process is not draining; 503 otherwise. The report says which, either way. Each check gives up
        after ``check_seconds``, so a hung dependency makes a prompt 503, not a hung probe."""
        services: Services | None = state.get("services")
        if services is None:
            return JSONResponse({"status": "starting"}, status_code=503)
        check_seconds = 2.0

        async def check(probe: Awaitable[Any]) -> tuple[Any, dict[str, Any]]:
            try:
                return await asyncio.wait_for(probe, check_seconds), {"up": True}
            except TimeoutError:
                return None, {"up": False, "error": f"no answer in {check_seconds:g} s"}
            except Exception as exc:  # the type only: messages may carry addresses or credentials
                return None, {"up": False, "error": type(exc).__name__}

        (schema, database), (_, bus) = await asyncio.gather(
            check(migrate.revisions(services.db)), check(services.bus.ping())
        )
        migrations: dict[str, Any] = (
            {"state": schema.state, "current": list(schema.current), "head": list(schema.head)}
            if schema is not None
            else {"state": "unknown"}
        )
        draining = bool(state.get("drained"))
        ready = database["up"] and bus["up"] and migrations["state"] in ("head", "ahead") and not draining
        report = {
            "status": "ready" if ready else "draining" if draining else "unavailable",
            "database": database,
            "bus": bus,
            "migrations": migrations,
            "draining": draining,
            "connections": len(services.connections),
        }
        return JSONResponse(report, status_code=200 if ready else 503, headers={"cache-control": "no-store"})

    routes = [
        WebSocketRoute("/trpc", ws_endpoint),
        Route("/trpc/{path:path}", http_endpoint, methods=["GET", "POST", "HEAD"]),
        *link_routes(lambda: state["services"], settings),
        *file_routes(lambda: state["services"]),
        *transcript_routes(lambda: state["services"], settings),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
    ]
    routes += AdminApi(state).routes()
    routes += web_routes(settings)  # last: the web app answers paths nothing above claimed
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.chatsync = state
    return ChatsyncApp(app, ws_endpoint, http_endpoint, settings)


RAW_SEND_KEY = "chatsync.raw_send"
OWNER_TOKEN_FILE = "chatsync-owner-token"


def announce_owner(token: str) -> None:
    """Show the first-start owner token once, on a terminal. When stderr is not a terminal (a service
    manager or container that keeps its output as a log), the token goes to a file only its owner can read,
    and the log gets the file's name."""
    if sys.stderr.isatty():
        print(f"chatsync: created the local owner; its token (shown once): {token}", file=sys.stderr, flush=True)
        return
    path = os.path.abspath(OWNER_TOKEN_FILE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    print(
        f"chatsync: created the local owner; its token is in {path} (readable by you only; delete it once you have it)",
        file=sys.stderr,
        flush=True,
    )


class ChatsyncApp:
    """The app ``create_app`` builds, around the Starlette app. Outermost ASGI layer: remembers the server's
    own ``send`` for WebSockets, before middleware wraps it, so a connection can reach the transport
    (``rpc/uvicorn_ws.py``).

    The tRPC WebSocket and tRPC ``GET``s (queries and SSE subscriptions) go straight to their endpoints, past
    Starlette's middleware and router: their coroutine frames would stay suspended for the whole life of every
    WebSocket and SSE stream (about 4 KiB each, a fifth of what an idle connection costs), and none of them
    acts on what these endpoints answer (they map every error themselves; uvicorn answers 500 for a bug)."""

    def __init__(self, app: Starlette, ws_endpoint: Any, http_endpoint: Any, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.state = app.state
        self.ws_endpoint = ws_endpoint
        self.http_endpoint = http_endpoint

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
                await self.ws_endpoint(WebSocket(scope, receive, send))
                return
        elif scope["type"] == "http" and scope["method"] == "GET":
            prefix = scope.get("root_path", "") + "/trpc/"
            if scope["path"].startswith(prefix):
                scope["app"] = self.app
                scope["path_params"] = {"path": scope["path"][len(prefix) :]}
                response = await self.http_endpoint(Request(scope, receive))
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


async def drain_app(app: ChatsyncApp | Starlette) -> None:
    """Graceful shutdown, callable before the server closes sockets (see ``cli.serve``); idempotent."""
    state = app.state.chatsync
    if "services" in state and not state.get("drained"):
        state["drained"] = True
        await _drain(state["services"], state["http"])


async def _drain(services: Services, http: HttpTransport) -> None:
    """Graceful shutdown: tell every client to reconnect, let buffers drain, then close."""
    http.shutdown()
    if services.connections:
        await asyncio.gather(
            *(c.shutdown(SHUTDOWN_DRAIN_SECONDS) for c in list(services.connections)), return_exceptions=True
        )
