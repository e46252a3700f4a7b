"""Reading the event logs from above the store: a subscription to a session's events or to a user's feed (each
a :class:`~server.sync.delivery.Delivery` that catches up from its own log, ``store.eventlog``), and a page of a
session's retained log for inspection. Procedures and the admin API read the logs only through here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from ..store import eventlog, repo
from ..store.db import Database
from ..sync.delivery import Delivery, SnapshotSource
from ..sync.hub import Hub
from ..sync.writer import SubscriptionWriter
from . import feed


class EventStream:
    """One subscription's stream, started when the transport runs it (``rpc.registry.Subscription``)."""

    def __init__(
        self,
        logs: EventLogs,
        channel: str,
        after: int,
        log: eventlog.LogReader,
        *,
        snapshots: SnapshotSource | None = None,
        client: dict[str, Any] | None = None,
        verify_live: bool = False,
    ) -> None:
        self.logs = logs
        self.channel = channel
        self.after = after
        self.log = log
        self.snapshots = snapshots
        self.client = client
        self.verify_live = verify_live

    async def run(self, send_item: Callable[[str | None, Any], None], writer: SubscriptionWriter | None = None) -> None:
        """Deliver until the subscription ends: items (the procedure's declared output type, as events go on
        the wire) to ``send_item``, or durable events to ``writer`` when the transport has one."""
        delivery = Delivery(
            self.logs.db,
            self.logs.hub,
            self.channel,
            self.after,
            send_item,
            self.snapshots,
            writer,
            self.client,
            self.log,
            verify_live=self.verify_live,
        )
        await delivery.run()


class EventLogs:
    """The event logs as subscribers and inspectors see them. ``snapshots`` gives a session's streaming text to
    a subscriber that joins mid-stream (the engine's, handed over at start)."""

    def __init__(self, db: Database, hub: Hub, snapshots: SnapshotSource | None = None) -> None:
        self.db = db
        self.hub = hub
        self.snapshots = snapshots

    def session(
        self, session_id: str, after: int, client: dict[str, Any] | None = None, *, verify_live: bool = False
    ) -> EventStream:
        """Every durable event of the session after ``after``, then live ones and streaming text. The caller
        checked the session is readable, or passes ``verify_live`` to have the first log read check it is live
        (``sync.admission``). ``client`` describes the subscriber for admins."""
        return EventStream(
            self,
            session_id,
            after,
            eventlog.SESSION_LOG,
            snapshots=self.snapshots,
            client=client,
            verify_live=verify_live,
        )

    def feed(self, user_id: str, after: int) -> EventStream:
        """The user's feed (``services.feed``) after ``after``, then live."""
        return EventStream(self, feed.channel(user_id), after, eventlog.FEED_LOG)

    async def page(self, session_id: str, after: int, limit: int) -> tuple[list[dict[str, Any]], int | None]:
        """Up to ``limit`` retained events of the session after seq ``after``, oldest first, as clients received
        them (``{seq, type, createdAt, event}``), and the oldest seq the log still holds (None when it holds
        none)."""
        async with self.db.read() as s:
            rows = await eventlog.events_after(s, session_id, after, limit)
            oldest = await eventlog.oldest_seq(s, session_id)
        items = [
            {"seq": e.seq, "type": e.type, "createdAt": repo.ms(e.created_at), "event": orjson.loads(e.payload)}
            for e in rows
        ]
        return items, oldest

    async def oldest_seq(self, session_id: str) -> int | None:
        """The oldest seq the session's log still holds (None when it holds none)."""
        async with self.db.read() as s:
            return await eventlog.oldest_seq(s, session_id)
