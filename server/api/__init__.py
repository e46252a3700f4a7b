"""The procedures clients call, registered on one :class:`~server.rpc.registry.Router`."""

from ..rpc.registry import Router
from . import auth, devices, mcp, messages, providers, runs, send, sessions, tools


def build_router() -> Router:
    router = Router()
    sessions.register(router)
    messages.register(router)
    send.register(router)
    tools.register(router)
    runs.register(router)
    auth.register(router)
    devices.register(router)
    mcp.register(router)
    providers.register(router)
    return router


__all__ = ["build_router"]
