"""The per-user session feed (``session.feed``): what a session list shows, live, on every device.

Each user has an event log of their own (``user_events``, seq 1, 2, 3, ... per user; ``users.feed_seq`` is
its end), with the same promises as a session's log: every event after ``lastEventId`` once, in order, and
``resync-required`` when that position is gone. A feed event is appended **in the transaction that made the
change** (a session's unit of work, session create and delete), under the user row's lock, so the feed
can never disagree with the sessions. Lock order is always session row, then user row.

One feed event per transaction at most: a transaction whose session events change something a session list
shows (:data:`TRIGGERS`) appends one ``session-updated`` with the session's summary as it is at commit.
Batched enqueues therefore cost one feed event, not one per message.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ..domain.events import EventEnvelope, dumps
from ..store.models import ChatSession, QueuedMessage, User, UserEvent
from ..store.prepared import Executor

if TYPE_CHECKING:
    from .uow import SessionHead

FEED_EVENT_TYPES = frozenset({"session-created", "session-updated", "session-deleted"})
# Session events after which a session list looks different (title, status, queue length, model, ...).
TRIGGERS = frozenset(
    {
        "queue-message-added",
        "queue-message-removed",
        "queue-cleared",
        "queue-paused",
        "queue-resumed",
        "session-updated",
        "title-changed",
    }
)
RETENTION = 1000  # feed events kept per user; an older lastEventId gets resync-required
TRIM_EVERY = 64

_USERS = User.__table__
_EVENTS = UserEvent.__table__
_BUMP = (
    update(_USERS)
    .where(_USERS.c.id == bindparam("uid"))
    .values(feed_seq=_USERS.c.feed_seq + 1)
    .returning(_USERS.c.feed_seq)
)
_INSERT = insert(_EVENTS)
_TRIM = delete(_EVENTS).where(_EVENTS.c.user_id == bindparam("uid"), _EVENTS.c.seq <= bindparam("keep_after"))
_QUEUE_LENGTH = select(func.count()).where(QueuedMessage.__table__.c.session_id == bindparam("sid"))


def channel(user_id: str) -> str:
    """The bus channel of a user's feed (session channels are UUIDs, so the names never meet)."""
    return "feed:" + user_id


def _ms(value: datetime | str | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):  # a plain SQLite read hands back the stored text
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def summary(row: ChatSession | SessionHead, queue_length: int, updated_at: datetime | None = None) -> dict[str, Any]:
    """What a session list shows of one session (``row``: a ``ChatSession`` or the queue's ``SessionHead``)."""
    return {
        "id": row.id,
        "title": row.title,
        "titleSource": row.title_source,
        "status": row.status,
        "provider": row.provider,
        "model": row.model,
        "queueLength": queue_length,
        "queuePaused": bool(row.queue_paused),
        "createdAt": _ms(row.created_at),
        "updatedAt": _ms(updated_at if updated_at is not None else row.updated_at),
    }


async def queue_length(db: Executor, session_id: str) -> int:
    return int((await db.execute(_QUEUE_LENGTH, {"sid": session_id})).one()[0])


async def append(db: Executor, user_id: str, type_: str, body: dict[str, Any], now: datetime) -> EventEnvelope:
    """Append one event to the user's feed inside the caller's transaction (takes the user row's lock)."""
    seq = int((await db.execute(_BUMP, {"uid": user_id})).one()[0])
    json = dumps({"type": type_, **body})
    await db.execute(_INSERT, {"user_id": user_id, "seq": seq, "type": type_, "payload": json, "created_at": now})
    if seq > RETENTION and seq % TRIM_EVERY == 0:
        await db.execute(_TRIM, {"uid": user_id, "keep_after": seq - RETENTION})
    return EventEnvelope(channel(user_id), seq, type_, json)


# --- reading (server.sync.delivery) ------------------------------------------------------------------------


class FeedLog:
    """The user feed as :class:`server.sync.delivery.Delivery` reads it; the key is the feed's channel."""

    ending_types: frozenset[str] = frozenset()

    @staticmethod
    def _uid(key: str) -> str:
        return key[len("feed:") :]

    async def events_after(self, s: AsyncSession, key: str, after: int, limit: int) -> list[Any]:
        stmt = (
            select(UserEvent)
            .where(UserEvent.user_id == self._uid(key), UserEvent.seq > after)
            .order_by(UserEvent.seq)
            .limit(limit)
        )
        return list((await s.execute(stmt)).scalars().all())

    async def last_seq(self, s: AsyncSession, key: str) -> int | None:
        return (await s.execute(select(User.feed_seq).where(User.id == self._uid(key)))).scalar_one_or_none()

    async def oldest_seq(self, s: AsyncSession, key: str) -> int | None:
        stmt = select(func.min(UserEvent.seq)).where(UserEvent.user_id == self._uid(key))
        return (await s.execute(stmt)).scalar_one()

    def resync_body(self, key: str, last: int) -> dict[str, Any]:
        return {"type": "resync-required", "lastEventId": str(last)}
