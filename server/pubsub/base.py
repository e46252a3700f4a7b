"""The bus interface. A backend moves batches of events between processes; it keeps no history.

History is the database event log: a subscriber that misses a bus message (reordering across replicas,
a Redis restart) reads the gap from the log, so a backend only has to be fast, not reliable.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any

from ..domain.events import EventEnvelope
from .buckets import RateBuckets
from .presence import MemoryPresence, PresenceStore
from .streams import SharedStreamTexts, UnsharedStreamTexts

MessageHandler = Callable[[str, Sequence[EventEnvelope]], None]
"""Called (synchronously, on the event loop) with a session id and the events published for it."""

ReconnectHandler = Callable[[], None]
"""Called after the backend lost messages (e.g. it reconnected); subscribers must catch up from the log."""


class Bus(abc.ABC):
    """One process's connection to the pub/sub medium. Channels are session ids."""

    def __init__(self) -> None:
        self._on_message: MessageHandler = lambda _sid, _events: None
        self._on_reconnect: ReconnectHandler = lambda: None

    def set_handlers(self, on_message: MessageHandler, on_reconnect: ReconnectHandler) -> None:
        """Register the single local consumer (the hub) of every subscribed channel."""
        self._on_message = on_message
        self._on_reconnect = on_reconnect

    @abc.abstractmethod
    async def connect(self) -> None:
        """Open connections and start listening."""

    @abc.abstractmethod
    async def disconnect(self) -> None:
        """Stop listening and close connections; ends, in bounded time, even while the medium is unreachable."""

    @abc.abstractmethod
    async def subscribe(self, session_id: str) -> None:
        """Start receiving a session's events; returns once the subscription is active."""

    @abc.abstractmethod
    async def unsubscribe(self, session_id: str) -> None:
        """Stop receiving a session's events."""

    @abc.abstractmethod
    async def publish(self, session_id: str, events: Sequence[EventEnvelope]) -> None:
        """Send events to every process subscribed to the session (this one included)."""

    async def ping(self) -> None:
        """Raise when the medium cannot carry messages now (``/readyz``); one round trip at most. The
        in-process bus always can."""

    def shared_stream_texts(self) -> SharedStreamTexts:
        """The shared partial texts of streaming messages that go with this bus (``streams.py``). The
        default suits one process, where the running stream's own buffer is enough."""
        return UnsharedStreamTexts(self)

    def rate_buckets(self) -> RateBuckets | None:
        """The token buckets every process on this bus shares (``buckets.py``), or None for a bus of one
        process, where each process's own buckets are the whole story."""
        return None

    def presence(self) -> PresenceStore:
        """Who has which session open (``presence.py``), shared by every process on this bus. The default
        suits one process."""
        return MemoryPresence()

    async def __aenter__(self) -> Bus:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.disconnect()


def create_bus(url: str, **options: Any) -> Bus:
    """Pick the backend by URL scheme; drivers are imported lazily.

    ``redis://host:port/db?prefix=name:`` sets the key prefix (default ``chatsync:``), so several
    deployments (or tests) can share one Redis. ``redis+cluster://host:port[,host:port...]`` (seed nodes,
    same ``prefix``) uses Redis Cluster with sharded pub/sub.
    """
    if url.startswith("memory://"):
        from .memory import MemoryBus

        return MemoryBus()
    if url.startswith(("redis://", "rediss://", "redis+cluster://")):
        from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        prefix = query.pop("prefix", None)
        if prefix:
            options.setdefault("prefix", prefix)
        if parts.scheme == "redis+cluster":
            from .redis_cluster import RedisClusterBus, parse_nodes

            return RedisClusterBus(parse_nodes(parts.netloc), **options)
        from .redis import RedisBus

        return RedisBus(urlunsplit(parts._replace(query=urlencode(query))), **options)
    raise ValueError(f"unsupported bus URL {url!r}")
