"""What the transports hand a procedure: :class:`Services`, everything built once per process (the composition
root, ``server.app``, builds it at start), and :class:`Context`, one call's caller and those services.

Both are types of the transport layer, so a procedure and a transport name them without importing the
composition root; every service call is then checked by mypy against the real classes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..engine import Orchestrator
from ..files import Files
from ..protocol.errors import RpcError
from ..pubsub import Bus
from ..services.admin import AdminReads
from ..services.auth import AuthService, Principal
from ..services.drafts import DraftService
from ..services.eventlogs import EventLogs
from ..services.links import SignInLinks
from ..services.presence import PresenceService
from ..services.push import PushService
from ..services.queue import QueueService
from ..services.readiness import Readiness
from ..services.runs import RunService
from ..services.sessions import SessionService
from ..services.titles import TitleService
from ..services.unread import UnreadService
from ..services.uow import UnitOfWork
from ..services.versions import VersionService
from ..settings import Settings
from ..store.db import Database
from ..store.models import User
from ..sync.hub import Hub
from ..sync.revocation import DeviceConnections
from ..tools import ToolRegistry
from ..tools.mcp import McpTools
from .limits import ConnectionSlots, RateLimiter

if TYPE_CHECKING:
    from .ws import WsConnection  # which imports this module


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
    devices: DeviceConnections
    limiter: RateLimiter
    slots: ConnectionSlots
    presence: PresenceService
    drafts: DraftService
    unread: UnreadService
    push: PushService
    event_logs: EventLogs
    admin: AdminReads
    readiness: Readiness
    connections: set[WsConnection] = field(default_factory=set)


@dataclass
class Context:
    """What a procedure knows about its caller."""

    user: User | None
    services: Services
    transport: Literal["ws", "http"]
    # The device (token) the caller signed in with, when it used one.
    device_id: str | None = None
    device_name: str | None = None
    # Where the caller reached this server (``http://host:port``), for links it may hand to other devices.
    base_url: str | None = None
    # A WebSocket's own id, and what to run when it closes (None over HTTP, where each call stands alone).
    connection_id: str | None = None
    on_close: list[Callable[[], Awaitable[None]]] | None = None

    def sign_in(self, principal: Principal | None) -> None:
        """Take the user and device of a ``services.auth.Principal`` (or nothing, for None)."""
        if principal is None:
            self.user = self.device_id = self.device_name = None
        else:
            self.user, self.device_id, self.device_name = principal.user, principal.device_id, principal.device_name

    def require_user(self) -> User:
        if self.user is None:
            raise RpcError("UNAUTHORIZED", "Missing or invalid token")
        return self.user
