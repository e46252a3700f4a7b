"""The procedures clients call, registered on one :class:`~server.rpc.registry.Router`."""
from ..rpc.registry import Router
from . import messages, sessions


def build_router() -> Router:
    router = Router()
    sessions.register(router)
    messages.register(router)
    return router


__all__ = ["build_router"]
