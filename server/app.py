"""The composition root: ``open_services(settings)`` builds every service once, each handed what it needs when
it is made, and ``create_app(settings)`` gives them to the HTTP surfaces (``server.http``). Nothing else in the
server imports this module; only the ``chatsync`` command (``server.cli``) does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager

from .api import build_router
from .domain import outputs
from .engine import MemoryPartialTexts, Orchestrator
from .files import Files, create_storage
from .http.asgi import ChatsyncApp
from .pubsub import Bus, create_bus
from .rpc.context import Services
from .rpc.limits import ConnectionSlots, RateLimiter, SharedRateLimiter
from .services.admin import AdminReads
from .services.auth import AuthService
from .services.drafts import DraftService
from .services.eventlogs import EventLogs
from .services.links import SignInLinks
from .services.presence import PresenceService
from .services.purge import Purger
from .services.push import PushService
from .services.queue import QueueService
from .services.readiness import Readiness
from .services.runs import RunAwareSessionService, RunService
from .services.unread import UnreadService
from .services.uow import UnitOfWork
from .services.versions import VersionService
from .settings import Settings, SettingsError
from .store import migrate
from .store.db import Database
from .store.models import User
from .sync import revocation
from .sync.hub import Hub
from .tools import ToolRegistry, register_builtins
from .tools.mcp import McpConfigError
from .tools.mcp import load as load_mcp

SHUTDOWN_DRAIN_SECONDS = 5.0


@asynccontextmanager
async def open_services(settings: Settings) -> AsyncIterator[Services]:
    """Every service, built once in the order they depend on each other, each handed what it needs when it is
    made; closed in the reverse order. Three links close a cycle, so they are made once both ends exist: the
    unit of work asks presence whether a session is in view (presence marks sessions read through the unread
    marks, which write through the unit of work); it tells Web Push about each commit (push approves tool calls
    through the runs, which write through it); and device revocations evict the auth service's cached tokens
    (the auth service revokes through the device connections)."""
    async with AsyncExitStack() as stack:
        db = await stack.enter_async_context(
            Database(settings.database_url, pool_timeout=settings.db_pool_timeout_seconds)
        )
        if settings.run_migrations_on_start:
            await migrate.upgrade(db)
        bus = await stack.enter_async_context(create_bus(settings.bus_url))
        devices = revocation.DeviceConnections(db, bus)
        hub = Hub(bus, channel_handlers={revocation.CHANNEL: devices.on_bus})
        await devices.start()
        stack.push_async_callback(devices.stop)
        uow = UnitOfWork(
            db,
            bus,
            settings.event_retention,
            max_active_runs=settings.max_active_runs_per_user,
            max_request_records=settings.max_request_records_per_user,
        )
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
        sessions = RunAwareSessionService(
            db,
            uow,
            runs=runs,
            titles=orchestrator.titles,
            default_provider=settings.default_provider,
            default_model=settings.default_model,
            max_per_user=settings.max_sessions_per_user,
            search_scan=settings.search_scan_sessions,
        )
        unread = UnreadService(db, uow)
        presence = PresenceService(db, bus, hub, bus.presence(), unread, settings.presence_ttl_seconds)
        uow.visible = presence.visible
        await presence.start()
        stack.push_async_callback(presence.stop)

        async def approve(
            user: User, session_id: str, call_id: str, approved: bool, device_name: str | None
        ) -> outputs.Resolved:
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
            event_logs=EventLogs(db, hub, orchestrator.stream_snapshots),
            admin=AdminReads(db),
            readiness=Readiness(db),
        )


def rate_limiter(settings: Settings, bus: Bus) -> RateLimiter:
    """The per-user mutation limit: in buckets every replica shares when the bus has them (Redis), else (and
    while they cannot be reached) in this process's own."""
    shared = bus.rate_buckets()
    if shared is None:
        return RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)
    return SharedRateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst, shared)


def create_app(settings: Settings, *, on_owner_token: Callable[[str], None] | None = None) -> ChatsyncApp:
    """The app ``chatsync serve`` runs. Its lifespan opens the services; a first start on an empty database
    creates the local owner and hands its token to ``on_owner_token`` (the command shows it once)."""

    @asynccontextmanager
    async def services() -> AsyncIterator[Services]:
        async with open_services(settings) as opened:
            token = await opened.auth.ensure_owner()
            if token is not None and on_owner_token is not None:
                on_owner_token(token)
            yield opened

    return ChatsyncApp(settings, build_router(), services, drain_seconds=SHUTDOWN_DRAIN_SECONDS)
