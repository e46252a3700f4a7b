"""The procedures clients call, registered on one :class:`~server.rpc.registry.Router`."""

from ..rpc.registry import Router
from . import auth, chat, devices, messages, providers, runs, sessions, tools


def build_router() -> Router:
    router = Router()
    sessions.register(router)
    messages.register(router)
    chat.register(router)
    tools.register(router)
    runs.register(router)
    auth.register(router)
    devices.register(router)
    providers.register(router)
    return router


__all__ = ["build_router"]
