"""Python client for chatsync over WebSocket (tRPC wire format)."""
from .trpc import ConnectionLost, Subscription, TrpcClient, TrpcError

__all__ = ["ConnectionLost", "Subscription", "TrpcClient", "TrpcError"]
