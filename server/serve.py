"""Running the app under uvicorn with chatsync's graceful shutdown."""

from __future__ import annotations

from typing import Any

import uvicorn

from . import logredact
from .app import ChatsyncApp, drain_app
from .rpc.uvicorn_ws import LeanWebSocketProtocol
from .settings import Settings


class ChatsyncServer(uvicorn.Server):
    """uvicorn's server, with the drain step put where it belongs.

    Shutdown order: stop accepting, send tRPC's ``reconnect`` notification to every WebSocket and end every
    SSE stream with a retryable error, let outbound buffers drain, then let uvicorn close what is left.
    (uvicorn alone would close WebSockets with 1012 before the app's lifespan shutdown ran.)
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        # uvicorn types ``Config.app`` loosely (any ASGI app or an import string); ours is built by create_app.
        self.app: ChatsyncApp = config.app  # type: ignore[assignment]

    async def startup(self, sockets: Any = None) -> None:
        # uvicorn configures its loggers when the config loads; the filter goes on after that.
        logredact.install()
        await super().startup(sockets)

    async def shutdown(self, sockets: Any = None) -> None:
        for server in self.servers:
            server.close()
        await drain_app(self.app)
        await super().shutdown(sockets)


def uvicorn_config(app: ChatsyncApp, settings: Settings, host: str, port: int, **extra: Any) -> uvicorn.Config:
    options: dict[str, Any] = {
        "log_level": settings.log_level,
        # Larger than our own limit, so an oversized frame reaches us and gets a typed error.
        "ws_max_size": settings.max_frame_bytes * 4,
        "ws_ping_interval": 20.0,
        "ws_ping_timeout": 20.0,
        "lifespan": "on",
        # The sans-I/O protocol lets connections write frames straight to the transport (rpc/outbox.py);
        # this subclass of it keeps less state per connection (rpc/uvicorn_ws.py).
        "ws": LeanWebSocketProtocol,
        "timeout_graceful_shutdown": 10,
    }
    return uvicorn.Config(app, host=host, port=port, **{**options, **extra})
