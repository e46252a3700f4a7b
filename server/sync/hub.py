"""Fan-out inside one process: one bus subscription per session, shared by every local subscriber."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

from .. import metrics, tracing
from ..domain.events import EventEnvelope
from ..pubsub.base import Bus
from .admission import OwnerCache
from .delivery import Delivery, fan_out

log = logging.getLogger(__name__)


class Hub:
    """Routes bus messages to the local deliveries of each session.

    Bus subscriptions are reference-counted by the set of local deliveries: the first delivery of a
    session subscribes, the last one unsubscribes. The transitions of one session run under that session's
    lock, so an attach that races a detach never ends with deliveries on an unsubscribed channel, while a
    slow bus subscribe of one session (a Redis round trip, or a wait through an outage) never holds up an
    attach to another. A session's lock lives only while someone holds or waits for it.
    """

    def __init__(
        self, bus: Bus, channel_handlers: dict[str, Callable[[Sequence[EventEnvelope]], None]] | None = None
    ) -> None:
        self.bus = bus
        self._local: dict[str, set[Delivery]] = {}
        # Channels that are not sessions' (``sync.revocation``, and presence's while it watches a session):
        # their messages go to one handler each.
        self.channel_handlers: dict[str, Callable[[Sequence[EventEnvelope]], None]] = dict(channel_handlers or {})
        self._locks: dict[str, _SessionLock] = {}
        # Who owns the sessions subscribed to here: a resume's ownership check without a read (``admission``).
        self.owners = OwnerCache()
        bus.set_handlers(self._on_message, self._on_reconnect)

    async def attach(self, delivery: Delivery) -> None:
        sid = delivery.session_id
        members = self._local.get(sid)
        if members is not None and sid not in self._locks:
            members.add(delivery)  # already subscribed, no transition under way: nothing to wait for
            return
        async with self._session_lock(sid):
            members = self._local.get(sid)
            if members is None:
                await self.bus.subscribe(sid)
                members = self._local[sid] = set()
            members.add(delivery)

    async def detach(self, delivery: Delivery) -> None:
        sid = delivery.session_id
        members = self._local.get(sid)
        if members is not None and len(members) > 1 and sid not in self._locks:
            members.discard(delivery)  # others stay: no transition
            return
        async with self._session_lock(sid):
            members = self._local.get(sid)
            if members is None:
                return
            members.discard(delivery)
            if not members:
                del self._local[sid]
                try:
                    await self.bus.unsubscribe(sid)
                except Exception:  # the bus may be down; its reconnect starts from our current set
                    log.warning("unsubscribe from %s failed", sid, exc_info=True)

    @asynccontextmanager
    async def _session_lock(self, sid: str) -> AsyncIterator[None]:
        entry = self._locks.get(sid)
        if entry is None:
            entry = self._locks[sid] = _SessionLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[sid]

    def subscriber_count(self, session_id: str | None = None) -> int:
        if session_id is not None:
            return len(self._local.get(session_id, ()))
        return sum(len(m) for m in self._local.values())

    def deliveries(self, session_id: str) -> tuple[Delivery, ...]:
        """This process's subscribers of one session (for admins)."""
        return tuple(self._local.get(session_id, ()))

    def subscribed_sessions(self) -> list[str]:
        return list(self._local)

    def _on_message(self, session_id: str, events: Sequence[EventEnvelope]) -> None:
        members = self._local.get(session_id)
        if members:
            first = events[0]
            if first.trace_parent is None:
                fan_out(tuple(members), events)
            else:
                with tracing.delivery(first, session_id, len(events)):
                    fan_out(tuple(members), events)
            metrics.delivered(first.published_at, first.seq is None, len(members) * len(events))
        else:
            handler = self.channel_handlers.get(session_id)
            if handler is not None:
                handler(events)

    def _on_reconnect(self) -> None:
        for members in tuple(self._local.values()):
            for delivery in tuple(members):
                delivery.request_catch_up()


class _SessionLock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0  # holders and waiters: the entry goes when the last leaves
