"""Python client for chatsync over WebSocket (tRPC wire format).

:class:`TrpcClient` speaks the wire protocol (any procedure, subscriptions with resume); :class:`ChatClient`
wraps the procedures in typed methods; :class:`SessionView` keeps a live local copy of one session. The
package also holds the terminal clients the ``chatsync`` command runs: ``chatsync sessions`` (``cli_sessions``)
and ``chatsync chat`` (``tui``). Of the server it imports only ``server.domain``: the wire models and the close
codes (an import-linter contract in pyproject.toml keeps it so).
"""

import logging

from .chat import DEFAULT_URL, ChatClient, RunFailed, SendResult, UploadedFile
from .trpc import (
    ConnectionLost,
    ConnectionRejected,
    ServerUnreachable,
    Subscription,
    TrpcClient,
    TrpcError,
)
from .view import Change, ConnectionState, SessionView, TextChunk

# A library: logs go where the application sends them, never to stderr by default (the CLI prints its own line).
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "DEFAULT_URL",
    "Change",
    "ChatClient",
    "ConnectionLost",
    "ConnectionRejected",
    "ConnectionState",
    "RunFailed",
    "SendResult",
    "ServerUnreachable",
    "SessionView",
    "Subscription",
    "TextChunk",
    "TrpcClient",
    "TrpcError",
    "UploadedFile",
]
