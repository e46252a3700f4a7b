"""Running the app under uvicorn with chatsync's graceful shutdown and bounded HTTP connections."""

from __future__ import annotations

import logging
import resource
import socket
from typing import Any

import uvicorn

from . import logredact
from .http.asgi import ChatsyncApp
from .rpc.uvicorn_http import HttpGate, guarded_http_protocol, http_gate
from .rpc.uvicorn_ws import LeanWebSocketProtocol
from .services import addresses
from .settings import Settings, is_loopback

log = logging.getLogger("chatsync")

RESERVED_DESCRIPTORS = 128
"""At least this many descriptors (and an eighth of the limit) are kept from client connections: for the
process's own (database and bus connections, logs, the listening socket) and for files being uploaded or
downloaded."""


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise this process's soft limit on open file descriptors to its hard limit; returns (before, now)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return soft, soft
        return soft, hard
    return soft, soft


def socket_budget(descriptor_limit: int) -> int:
    """How many client connections ``descriptor_limit`` descriptors carry (see :data:`RESERVED_DESCRIPTORS`)."""
    if descriptor_limit == resource.RLIM_INFINITY:
        return 1 << 30
    return max(8, descriptor_limit - max(RESERVED_DESCRIPTORS, descriptor_limit // 8))


class ChatsyncServer(uvicorn.Server):
    """uvicorn's server, with the drain step put where it belongs.

    Shutdown order: stop accepting, send tRPC's ``reconnect`` notification to every WebSocket and end every
    SSE stream with a retryable error, let outbound buffers drain, then let uvicorn close what is left.
    (uvicorn alone would close WebSockets with 1012 before the app's lifespan shutdown ran.)

    At start it raises the descriptor limit as far as it goes and bounds connections by it (and says so).
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._instance = addresses.instance_id()
        # uvicorn types ``Config.app`` loosely (any ASGI app or an import string); ours is built by create_app.
        self.app: ChatsyncApp = config.app  # type: ignore[assignment]

    async def startup(self, sockets: Any = None) -> None:
        # uvicorn configures its loggers when the config loads; the filter goes on after that.
        logredact.install()
        self._bound_connections()
        self._warn_about_links()
        await super().startup(sockets)
        await self._record_address()

    def listening_url(self) -> str | None:
        """``http://host:port`` of the first TCP socket this server listens on (the port it really got), with a
        wildcard host named as loopback (as ``Settings.link_base`` does); ``None`` for a Unix socket or fd."""
        for server in self.servers:
            for sock in server.sockets:
                if sock.family not in (socket.AF_INET, socket.AF_INET6):
                    continue
                host, port = sock.getsockname()[:2]
                if host in ("0.0.0.0", "::", ""):
                    host = "127.0.0.1"
                return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        return None

    async def _record_address(self) -> None:
        url = self.listening_url()
        services = self.app.state.services
        if url is None or services is None:
            return
        try:
            await addresses.record(services.db, self._instance, url)
        except Exception:  # links then name the configured address, as before
            log.warning("could not record this server's address for `chatsync link`", exc_info=True)

    def _bound_connections(self) -> None:
        before, now = raise_descriptor_limit()
        budget = socket_budget(now)
        gate = http_gate(self.config.http)
        if gate is not None:
            gate.max_sockets = budget
        raised = f" (raised from {before})" if now != before else ""
        log.info("open file descriptor limit %d%s: up to %d client connections at once", now, raised, budget)
        if budget < self.app.settings.max_connections:
            log.warning(
                "the open file descriptor limit (%d) carries %d connections, fewer than CHATSYNC_MAX_CONNECTIONS "
                "(%d): raise the hard limit (ulimit -Hn, LimitNOFILE=) to serve that many",
                now,
                budget,
                self.app.settings.max_connections,
            )

    def _warn_about_links(self) -> None:
        if self.app.settings.public_url or self.config.uds or self.config.fd is not None:
            return
        if not is_loopback(self.config.host):
            log.warning(
                "serving on %s without CHATSYNC_PUBLIC_URL: device sign-in links will name whatever address the "
                "asking client used (its Host header); set CHATSYNC_PUBLIC_URL to the address other devices "
                "reach this server at",
                self.config.host,
            )

    async def shutdown(self, sockets: Any = None) -> None:
        for server in self.servers:
            server.close()
        services = self.app.state.services
        if services is not None:
            try:
                await addresses.forget(services.db, self._instance)
            except Exception:
                log.warning("could not remove this server's recorded address", exc_info=True)
        await self.app.drain()
        await super().shutdown(sockets)


def uvicorn_config(app: ChatsyncApp, settings: Settings, host: str, port: int, **extra: Any) -> uvicorn.Config:
    gate = HttpGate(
        header_timeout=settings.http_header_timeout_seconds,
        body_timeout=settings.http_body_timeout_seconds,
        drain_bytes=settings.http_drain_bytes,
        max_connections=settings.max_http_connections,
        max_sockets=socket_budget(resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
    )
    options: dict[str, Any] = {
        "log_level": settings.log_level,
        # Larger than our own limit, so an oversized frame reaches us and gets a typed error.
        "ws_max_size": settings.max_frame_bytes * 4,
        "ws_ping_interval": 20.0,
        "ws_ping_timeout": 20.0,
        "lifespan": "on",
        # uvicorn's httptools protocol with deadlines and bounds on connections (rpc/uvicorn_http.py).
        "http": guarded_http_protocol(gate),
        # The sans-I/O protocol lets connections write frames straight to the transport (rpc/writer.py);
        # this subclass of it keeps less state per connection (rpc/uvicorn_ws.py).
        "ws": LeanWebSocketProtocol,
        "timeout_graceful_shutdown": 10,
    }
    if settings.log_format == "json":
        # uvicorn's own lines (requests, WebSockets, errors) go to the root logger's JSON handler instead of
        # the text handlers uvicorn would configure for itself (``logformat.configure`` set it up).
        options["log_config"] = None
    return uvicorn.Config(app, host=host, port=port, **{**options, **extra})
