"""The event logs: every durable session event (``events``) and every user feed event (``user_events``).

Each log is a sequence numbered 1, 2, 3, ... per key (session id, user id), whose end is kept on the key's
row (``sessions.last_seq``, ``users.feed_seq``). This module is the only code that writes, trims or reads
them:

* **sequence**: an event's seq is the end + 1, taken while the key's row is locked, so writers to one log are
  serialised and a seq is handed out only after the transaction holding the one before it committed (a reader
  that sees N+1 can always read N: ``sync.delivery`` relies on it);
* **append**: in the transaction that made the change (a transactional outbox: the state and the events
  commit together, and publishing happens after the commit); a session's end is written with the session row's
  other changes (``services.uow.SessionTx.finish``), a feed's here;
* **trim**: the oldest events beyond a retention count are deleted once per :data:`TRIM_EVERY` appends, not
  on every append; a reader whose position was trimmed is told ``resync-required``;
* **read**: :class:`SessionLog` and :class:`FeedLog` are the two logs as a catch-up reads them
  (:class:`LogReader`), and :func:`events_after` / :func:`oldest_seq` serve the admin API.

Appends use plain Core statements built once: they run on the busiest write path of the server (every
queue edit, every message), in ORM transactions and in the queue's plain-connection transactions alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ..domain.events import EventEnvelope, FeedEvent, dumps
from .models import ChatSession, Event, User, UserEvent
from .prepared import Executor, PreparedConnection

TRIM_EVERY = 64  # trim a log once per this many appends, not on every one

# --- a session's log ------------------------------------------------------------------------------------

_SESSIONS = ChatSession.__table__
_EVENTS = Event.__table__
_INSERT_EVENT = insert(_EVENTS)
_TRIM_EVENTS = delete(_EVENTS).where(_EVENTS.c.session_id == bindparam("sid"), _EVENTS.c.seq <= bindparam("keep_after"))
_SESSION_END = select(_SESSIONS.c.last_seq).where(_SESSIONS.c.id == bindparam("sid"))
_SESSION_OLDEST = select(func.min(_EVENTS.c.seq)).where(_EVENTS.c.session_id == bindparam("sid"))


def next_seq(last_seq: int) -> int:
    """The seq of the next event of a log whose end is ``last_seq`` (its key's row locked by the caller)."""
    return last_seq + 1


async def append(db: Executor, events: Sequence[EventEnvelope], now: datetime, retention: int) -> None:
    """Write ``events`` (consecutive seqs of one session, from :func:`next_seq`) to the session's log, and trim the
    log to its newest ``retention`` events when due. The session's end moves to the last of them with the row's
    other changes, in the same transaction: the caller writes ``sessions.last_seq`` (``SessionTx.finish``, one
    ``UPDATE`` of the row with whatever else the transaction changed in it)."""
    if not events:
        return
    sid, last = events[0].session_id, events[-1].seq
    assert last is not None, "only durable events are logged"
    rows = [{"session_id": sid, "seq": e.seq, "type": e.type, "payload": e.json, "created_at": now} for e in events]
    # One row: a plain execute (drivers' executemany costs more for a single row).
    await db.execute(_INSERT_EVENT, rows[0] if len(rows) == 1 else rows)
    if last > retention and last // TRIM_EVERY != (last - len(events)) // TRIM_EVERY:
        await trim(db, sid, last - retention)


async def trim(db: Executor, session_id: str, keep_after_seq: int) -> None:
    """Delete the session's events up to and including ``keep_after_seq``."""
    await db.execute(_TRIM_EVENTS, {"sid": session_id, "keep_after": keep_after_seq})


async def events_after(db: AsyncSession, session_id: str, after_seq: int, limit: int) -> Sequence[Event]:
    """Up to ``limit`` retained events of the session after ``after_seq``, oldest first."""
    stmt = select(Event).where(Event.session_id == session_id, Event.seq > after_seq).order_by(Event.seq).limit(limit)
    return (await db.execute(stmt)).scalars().all()


async def oldest_seq(db: AsyncSession, session_id: str) -> int | None:
    """The oldest retained seq of the session's log (None when it holds nothing)."""
    oldest = (await db.execute(_SESSION_OLDEST, {"sid": session_id})).scalar_one()
    return None if oldest is None else int(oldest)


# --- reading a log to catch up ------------------------------------------------------------------------------


class LoggedEvent(Protocol):
    """A row of either log, as a catch-up reads it."""

    seq: int
    type: str
    payload: str


class LogReader(Protocol):
    """One kind of log as ``sync.delivery`` reads it to catch a subscriber up; ``key`` is the subscription's
    channel (a session id, or a feed channel)."""

    ending_types: frozenset[str]  # events after which the subscription ends

    async def events_after(self, db: AsyncSession, key: str, after: int, limit: int) -> Sequence[LoggedEvent]: ...

    async def last_seq(self, db: AsyncSession, key: str) -> int | None:
        """The log's end; None when the key never existed."""
        ...

    async def oldest_seq(self, db: AsyncSession, key: str) -> int | None: ...

    def resync_body(self, key: str, last: int) -> dict[str, Any]:
        """What a subscriber whose position is gone is sent before its subscription ends."""
        ...


class SessionLog:
    """A session's log. A deleted session's log stays readable up to its ``session-deleted``."""

    ending_types = frozenset({"session-deleted"})

    async def events_after(self, db: AsyncSession, key: str, after: int, limit: int) -> Sequence[Event]:
        return await events_after(db, key, after, limit)

    async def last_seq(self, db: AsyncSession, key: str) -> int | None:
        return (await db.execute(_SESSION_END, {"sid": key})).scalar_one_or_none()

    async def oldest_seq(self, db: AsyncSession, key: str) -> int | None:
        return await oldest_seq(db, key)

    def resync_body(self, key: str, last: int) -> dict[str, Any]:
        return {"type": "resync-required", "sessionId": key, "lastEventId": str(last)}


SESSION_LOG = SessionLog()


# --- a user's feed ---------------------------------------------------------------------------------------

FEED_RETENTION = 1000  # feed events kept per user; an older lastEventId gets resync-required
FEED_PREFIX = "feed:"

_USERS = User.__table__
_FEED = UserEvent.__table__
_FEED_COLUMNS = ("user_id", "seq", "type", "payload", "created_at")
# Not named after a column of ``users``: a parameter with a column's name would join the UPDATE's SET.
_FEED_VALUES = (
    bindparam("event_type", type_=_FEED.c.type.type),
    bindparam("event_payload", type_=_FEED.c.payload.type),
    bindparam("event_at", type_=_FEED.c.created_at.type),
)
_FEED_MOVE = update(_USERS).where(_USERS.c.id == bindparam("uid")).values(feed_seq=_USERS.c.feed_seq + 1)
_FEED_BUMP = _FEED_MOVE.returning(_USERS.c.feed_seq)
_BUMPED = _FEED_MOVE.returning(_USERS.c.id, _USERS.c.feed_seq).cte("bumped")
# PostgreSQL: one statement moves the end and writes the event, the UPDATE in a WITH feeding the INSERT (a round
# trip, and SQLAlchemy's work for a statement, less). The UPDATE takes the user row's lock; a writer that waited
# for it reads the end its predecessor committed.
_FEED_APPEND = (
    insert(_FEED)
    .from_select(_FEED_COLUMNS, select(_BUMPED.c.id, _BUMPED.c.feed_seq, *_FEED_VALUES))
    .returning(_FEED.c.seq)
)
# SQLite allows no UPDATE inside a WITH: the UPDATE, then the INSERT. (One statement there would need a trigger on
# user_events moving the end, and measured no cheaper: the two are prepared statements on the process's own
# connection, without a round trip.)
_FEED_INSERT = insert(_FEED)
_FEED_TRIM = delete(_FEED).where(_FEED.c.user_id == bindparam("uid"), _FEED.c.seq <= bindparam("keep_after"))
_FEED_END = select(_USERS.c.feed_seq).where(_USERS.c.id == bindparam("uid"))
_FEED_OLDEST = select(func.min(_FEED.c.seq)).where(_FEED.c.user_id == bindparam("uid"))


def feed_channel(user_id: str) -> str:
    """The bus channel (and log key) of a user's feed; session channels are UUIDs, so the names never meet."""
    return FEED_PREFIX + user_id


async def append_feed(db: Executor, user_id: str, event: FeedEvent, now: datetime) -> EventEnvelope:
    """Append one event to the user's feed inside the caller's transaction (this takes the user row's lock: lock
    order is always session row, then user row): on PostgreSQL one statement moves the feed's end and writes the
    event, on SQLite two."""
    type_ = event.type
    json = dumps({"type": type_, **event.fields})
    if _on_sqlite(db):
        seq = int((await db.execute(_FEED_BUMP, {"uid": user_id})).one()[0])
        row = {"user_id": user_id, "seq": seq, "type": type_, "payload": json, "created_at": now}
        await db.execute(_FEED_INSERT, row)
    else:
        params = {"uid": user_id, "event_type": type_, "event_payload": json, "event_at": now}
        seq = int((await db.execute(_FEED_APPEND, params)).one()[0])
    if seq > FEED_RETENTION and seq % TRIM_EVERY == 0:
        await db.execute(_FEED_TRIM, {"uid": user_id, "keep_after": seq - FEED_RETENTION})
    return EventEnvelope(feed_channel(user_id), seq, type_, json)


def _on_sqlite(db: Executor) -> bool:
    if isinstance(db, PreparedConnection):
        return True
    bind = db.get_bind() if isinstance(db, AsyncSession) else db
    return bind.dialect.name == "sqlite"


class FeedLog:
    """A user's feed; the key is the feed's channel (:func:`feed_channel`)."""

    ending_types: frozenset[str] = frozenset()

    @staticmethod
    def _uid(key: str) -> str:
        return key[len(FEED_PREFIX) :]

    async def events_after(self, db: AsyncSession, key: str, after: int, limit: int) -> Sequence[UserEvent]:
        stmt = (
            select(UserEvent)
            .where(UserEvent.user_id == self._uid(key), UserEvent.seq > after)
            .order_by(UserEvent.seq)
            .limit(limit)
        )
        return (await db.execute(stmt)).scalars().all()

    async def last_seq(self, db: AsyncSession, key: str) -> int | None:
        return (await db.execute(_FEED_END, {"uid": self._uid(key)})).scalar_one_or_none()

    async def oldest_seq(self, db: AsyncSession, key: str) -> int | None:
        oldest = (await db.execute(_FEED_OLDEST, {"uid": self._uid(key)})).scalar_one()
        return None if oldest is None else int(oldest)

    def resync_body(self, key: str, last: int) -> dict[str, Any]:
        return {"type": "resync-required", "lastEventId": str(last)}


FEED_LOG = FeedLog()
