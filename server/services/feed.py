"""The per-user session feed (``session.feed``): what a session list shows, live, on every device.

Each user has an event log of their own (``store.eventlog``: ``user_events``, seq 1, 2, 3, ... per user), with
the same promises as a session's log: every event after ``lastEventId`` once, in order, and
``resync-required`` when that position is gone. A feed event is appended **in the transaction that made the
change** (a session's unit of work, session create and delete), under the user row's lock, so the feed
can never disagree with the sessions. Lock order is always session row, then user row.

One feed event per transaction at most: a transaction whose session events change something a session list
shows (:data:`TRIGGERS`) appends one ``session-updated`` with the session's summary as it is at commit.
Batched enqueues therefore cost one feed event, not one per message.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, func, select

from ..domain.events import DurableEventType
from ..store import eventlog
from ..store.models import QueuedMessage
from ..store.prepared import Executor
from ..store.session_row import SessionFields

# Session events after which a session list looks different (title, status, queue length, model, ...).
TRIGGERS: frozenset[DurableEventType] = frozenset(
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
_QUEUE_LENGTH = select(func.count()).where(QueuedMessage.__table__.c.session_id == bindparam("sid"))


def channel(user_id: str) -> str:
    """The bus channel of a user's feed (session channels are UUIDs, so the names never meet)."""
    return eventlog.feed_channel(user_id)


def _ms(value: datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def summary(row: SessionFields, queue_length: int, updated_at: datetime | None = None) -> dict[str, Any]:
    """What a session list shows of one session (``row``: as read, or as a write transaction has it)."""
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
        **unread_fields(row),
        "pinned": bool(row.pinned),
        "archived": bool(row.archived),
    }


def unread_fields(row: SessionFields) -> dict[str, Any]:
    """``unread``: an answer, a failure or an approval request the owner has not looked at yet
    (``services.unread``); ``attention``: which (``answer``, ``failure``, ``approval``), or None."""
    unread = int(row.attention_seq or 0) > int(row.seen_seq or 0)
    return {"unread": unread, "attention": row.attention_kind if unread else None}


async def queue_length(db: Executor, session_id: str) -> int:
    return int((await db.execute(_QUEUE_LENGTH, {"sid": session_id})).one()[0])
