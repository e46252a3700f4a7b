"""The unit of work behind every session mutation: state change + event-log append in one transaction,
publish after commit (a transactional outbox: an invariant of docs/architecture.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value

from .. import metrics, tracing
from ..domain import events
from ..domain.events import Event, EventEnvelope
from ..protocol.errors import RpcError
from ..pubsub.base import Bus
from ..store import eventlog, repo
from ..store.db import Database
from ..store.models import ChatSession, User, utcnow
from ..store.prepared import Executor, PlainConnection
from ..store.repo import ModelT
from . import feed, requests, unread
from .requests import ReceiptT, ReplyT, RequestKey

log = logging.getLogger(__name__)

_SESSIONS = ChatSession.__table__
_LOCK_SESSION_HEAD = (
    select(
        _SESSIONS.c.id,
        _SESSIONS.c.owner_id,
        _SESSIONS.c.run_id,
        _SESSIONS.c.queue_paused,
        _SESSIONS.c.last_seq,
        _SESSIONS.c.title,
        _SESSIONS.c.title_source,
        _SESSIONS.c.status,
        _SESSIONS.c.provider,
        _SESSIONS.c.model,
        _SESSIONS.c.created_at,
        _SESSIONS.c.pinned,
        _SESSIONS.c.archived,
        _SESSIONS.c.attention_seq,
        _SESSIONS.c.attention_kind,
        _SESSIONS.c.seen_seq,
    )
    .where(_SESSIONS.c.id == bindparam("sid"), _SESSIONS.c.deleted_at.is_(None))
    .with_for_update()
)


@dataclass
class SessionHead:
    """The few columns of a locked session that queue operations read (no ORM object: see ``UnitOfWork.queue``),
    and what the user's session feed shows of it."""

    id: str
    owner_id: str
    run_id: str | None
    queue_paused: bool
    last_seq: int
    title: str
    title_source: str
    status: str
    provider: str
    model: str
    created_at: datetime
    pinned: bool
    archived: bool
    # Unread (``services.unread``).
    attention_seq: int = 0
    attention_kind: str | None = None
    seen_seq: int = 0
    updated_at: datetime | None = None


DbT = TypeVar("DbT", bound=Executor)
RowT = TypeVar("RowT", bound=ChatSession | SessionHead)


@dataclass
class SessionTxBase(Generic[DbT, RowT]):
    """An open transaction on one locked session. ``emit`` appends a durable event to its log; ``finish``
    writes the events (and the client request records and the owner's feed event) before the commit.

    Two kinds, each with precise types: :class:`SessionTx` (an ORM session and the :class:`ChatSession`) for
    every session write, and :class:`QueueTx` (a plain connection and the :class:`SessionHead`) for the
    queue's hot path. What they share (the log, the feed, request records) is here and uses only
    ``db.execute`` with constant statements and the columns both rows have."""

    db: DbT
    row: RowT
    retention: int
    events: list[EventEnvelope] = field(default_factory=list)
    # The user feed's event for this transaction (written by ``finish``).
    feed_events: list[EventEnvelope] = field(default_factory=list)
    # Its exactly-once records (``services.requests``): what it replays, what it records.
    ledger: requests.Ledger = field(default_factory=requests.Ledger)
    # The queue's length at commit when the caller knows it (the queue's hot path), saving the feed a count.
    queue_length: int | None = None
    # How many runs the session's owner may have in progress at once (``transitions.begin_run``); None: no cap.
    max_active_runs: int | None = None
    # Whether a device of the owner has the session in view now (``services.presence``), for unread marks.
    visible: unread.Visible | None = None
    # Set by ``finish``: an event that wants attention committed while a device had the session in view.
    seen_in_view: bool = False

    def _advance(self, seq: int) -> None:
        """Move the row's ``last_seq`` in memory (``finish`` writes it)."""
        raise NotImplementedError

    async def plain(self) -> Executor:
        """Where constant statements run (``finish``'s, the run's), with everything the transaction changed
        visible."""
        raise NotImplementedError

    async def _written(self, now: datetime) -> None:
        """After ``finish`` wrote the log: bring the in-memory row up to date."""

    def emit(self, event: Event) -> EventEnvelope:
        """Append ``event`` (made by a constructor of ``domain.events``) to the session's log, at the next seq."""
        # The row's last_seq moves in memory only; ``finish`` writes it (and the log rows) with plain
        # statements (``store.eventlog``), cheaper than the ORM's unit of work on the hottest path of the server.
        seq = eventlog.next_seq(self.row.last_seq)
        self._advance(seq)
        env = EventEnvelope.build(self.row.id, seq, event.type, event.fields)
        self.events.append(env)
        return env

    async def replay(
        self,
        key: RequestKey | None,
        kind: requests.Receipt[ReceiptT, ReplyT],
        expand: requests.Expand[ReceiptT, ReplyT],
    ) -> ReplyT | requests.Missing:
        """The first reply to this client request if it was made before, rebuilt by ``expand`` from the receipt
        :meth:`remember` kept (read as ``kind`` says; see ``services.requests``), else ``requests.MISSING``. Call
        it with the session locked, before changing anything."""
        return await self.ledger.replay(self.db, key, kind, expand)

    def remember(self, key: RequestKey | None, kind: requests.Receipt[ReceiptT, ReplyT], receipt: ReceiptT) -> None:
        """Record ``receipt`` (what rebuilds the reply, of ``kind``) for the client request ``key``, committed with
        this transaction; a repeat of ``key`` within this transaction gets the reply rebuilt from it."""
        self.ledger.remember(key, kind, receipt)

    async def finish(self) -> None:
        if not self.ledger.rows and not self.events:
            return
        db = await self.plain()
        await self.ledger.write(db)
        if not self.events:
            return
        now = utcnow()
        await eventlog.append(db, self.events, now, self.retention)
        await self._written(now)
        self.seen_in_view = await unread.note(db, self.row, self.events, self.visible)
        await self._feed(db, now)

    async def _feed(self, db: Executor, now: datetime) -> None:
        """One feed event for the owner when this transaction changed what a session list shows."""
        types = {e.type for e in self.events}
        owner = self.row.owner_id
        if "session-deleted" in types:
            env = await eventlog.append_feed(db, owner, events.feed_session_deleted(self.row.id), now)
        elif not types.isdisjoint(feed.TRIGGERS):
            length = self.queue_length
            if length is None:
                length = await feed.queue_length(db, self.row.id)
            summary = feed.summary(self.row, length, now)
            env = await eventlog.append_feed(db, owner, events.feed_session_updated(self.row.id, summary), now)
        else:
            return
        self.feed_events.append(env)


class SessionTx(SessionTxBase[AsyncSession, ChatSession]):
    """A transaction on a locked session through the ORM: ``db`` is the session, ``row`` the
    :class:`ChatSession` (see :meth:`UnitOfWork.session`), ``core`` the connection under it for constant Core
    statements (``Database.core``: no ORM work per statement).

    The run's writes (messages, runs, tool calls) go in through :meth:`insert`, one prepared ``INSERT`` each
    instead of the unit of work's flush; the objects are then in the session as if loaded, so later changes to
    them in the same transaction are flushed as usual."""

    core: PlainConnection | None = None

    def _advance(self, seq: int) -> None:
        set_committed_value(self.row, "last_seq", seq)

    async def plain(self) -> Executor:
        await self.db.flush()  # before the plain statements, which do not autoflush
        return self.db if self.core is None else self.core

    async def _written(self, now: datetime) -> None:
        set_committed_value(self.row, "updated_at", now)

    async def get(self, model: type[ModelT], *key: Any) -> ModelT | None:
        """The row of ``model`` with primary key ``key``, loaded with one prepared statement (``repo.load``)."""
        return await repo.load(self.db, await self.plain(), model, key)

    async def insert(self, *rows: Any) -> None:
        """Write new ORM objects (every column set, or left to its Python default) with one prepared
        ``INSERT`` each and add them to the session as persistent, unchanged objects."""
        db = self.db if self.core is None else self.core
        for row in rows:
            await db.execute(*repo.insert_values(row))
            make_transient_to_detached(row)
            self.db.add(row)


class QueueTx(SessionTxBase[PlainConnection, SessionHead]):
    """The queue's hot path: ``db`` is a plain connection (``store.prepared``: constant Core statements only)
    and ``row`` the :class:`SessionHead` (see :meth:`UnitOfWork.queue`)."""

    def _advance(self, seq: int) -> None:
        self.row.last_seq = seq

    async def plain(self) -> Executor:
        return self.db


AnySessionTx = SessionTx | QueueTx
"""Either kind of session transaction: for code that uses only what they share."""


def can_read(user: User, row: ChatSession) -> bool:
    return row.owner_id == user.id or user.role == "admin"


class UnitOfWork:
    """Every write to a session: :meth:`session` locks the row and yields a :class:`SessionTx`; its events are
    appended to the log in the same transaction and published after the commit."""

    def __init__(
        self,
        db: Database,
        bus: Bus,
        retention: int,
        *,
        max_active_runs: int | None = None,
        max_request_records: int = requests.MAX_PER_USER,
    ) -> None:
        self.db = db
        self.bus = bus
        self.retention = retention
        self.max_active_runs = max_active_runs  # CHATSYNC_MAX_ACTIVE_RUNS_PER_USER
        self.max_request_records = max_request_records  # CHATSYNC_MAX_REQUEST_RECORDS_PER_USER
        # Set at start, once presence exists (it is built on this unit of work): ``services.presence``.
        self.visible: unread.Visible | None = None
        # Told every committed transaction's events after they were published (``services.push``); each must
        # return at once and never raise.
        self.observers: list[Callable[[AnySessionTx], None]] = []

    @asynccontextmanager
    async def session(
        self, user: User | None, session_id: str, *, missing: Callable[[str], Exception] | None = None
    ) -> AsyncIterator[SessionTx]:
        """Lock the caller's session, yield a :class:`SessionTx`, commit, then publish its events.

        Someone else's session is ``NOT_FOUND``: we do not reveal that it exists. ``user=None`` is the server
        itself (background work such as model titles, the engine): no owner to check. ``missing`` makes the
        exception raised when the session does not exist (or is not the user's) instead of ``NOT_FOUND``.
        """
        async with self.db.write() as s:
            core = await self.db.core(s)
            found = await repo.load(s, core, ChatSession, (session_id,), lock=True)
            row = self._owned(found, user, session_id, missing)
            tx = SessionTx(
                s,
                row,
                self.retention,
                max_active_runs=self.max_active_runs,
                visible=self.visible,
                ledger=requests.Ledger(self.max_request_records),
            )
            tx.core = core
            yield tx
            await tx.finish()
        await self.publish_tx(tx)

    @asynccontextmanager
    async def queue(self, user: User, session_id: str) -> AsyncIterator[QueueTx]:
        """The fast path of :meth:`session` for operations that need only :class:`SessionHead` and constant
        statements: a :class:`QueueTx`, with the same locking, checks, commit and publish.

        Queue edits are the busiest writes (every message typed while the model answers, from every client);
        without the ORM, and on SQLite without SQLAlchemy's per-statement work, their transaction costs a
        fraction of the CPU.
        """
        async with self.db.write(plain=True) as db:
            found = (await db.execute(_LOCK_SESSION_HEAD, {"sid": session_id})).first()
            head = self._owned(SessionHead(*found) if found is not None else None, user, session_id)
            tx = QueueTx(db, head, self.retention, ledger=requests.Ledger(self.max_request_records))
            yield tx
            await tx.finish()
        await self.publish_tx(tx)

    @staticmethod
    def _owned(
        row: RowT | None, user: User | None, session_id: str, missing: Callable[[str], Exception] | None = None
    ) -> RowT:
        """``row`` when the session exists and is ``user``'s (any session for ``user=None``)."""
        if row is None or (user is not None and row.owner_id != user.id):
            raise RpcError("NOT_FOUND", "Session not found") if missing is None else missing(session_id)
        return row

    async def publish_tx(self, tx: AnySessionTx) -> None:
        await self.publish(tx.row.id, tx.events)
        if tx.feed_events:
            await self.publish(feed.channel(tx.row.owner_id), tx.feed_events)
        if tx.events:
            for observer in self.observers:
                try:
                    observer(tx)
                except Exception:
                    log.warning("an observer of committed events failed", exc_info=True)

    async def publish(self, session_id: str, events: list[EventEnvelope]) -> None:
        """Best effort: a lost publish is repaired by subscribers reading the log, so never fail the call."""
        if not events:
            return
        metrics.count_durable(e.type for e in events if e.seq is not None)
        tracing.stamp(events[0])  # the commit's time and trace, carried to every replica's fan-out
        started = time.perf_counter()
        try:
            await self.bus.publish(session_id, events)
            metrics.BUS_PUBLISH.observe(time.perf_counter() - started)
        except Exception:
            log.warning("publish to %s failed; subscribers will catch up from the log", session_id, exc_info=True)
