"""The unit of work behind every session mutation: state change + event-log append in one transaction,
publish after commit (a transactional outbox: an invariant of docs/architecture.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import make_transient_to_detached

from .. import metrics, tracing
from ..domain import events
from ..domain.events import Event, EventEnvelope
from ..protocol.errors import RpcError
from ..pubsub.base import Bus
from ..store import eventlog, repo, run_rows, session_row
from ..store.db import Database, WriteSession
from ..store.models import User, utcnow
from ..store.prepared import PlainConnection
from ..store.repo import ModelT
from ..store.run_rows import CallRow, MessageRow, PlainRow, PlainRowT, RunRow
from ..store.session_row import SessionFields, SessionRow
from . import feed, requests, unread
from .requests import ReceiptT, ReplyT, RequestKey

log = logging.getLogger(__name__)


@dataclass
class SessionTx:
    """An open transaction on one locked session: every write to a session goes through one
    (:meth:`UnitOfWork.session`).

    * ``row`` is the session's :class:`SessionRow`, a plain object: assign its columns (``tx.row.status =
      "running"``) and :meth:`finish` writes the changed ones with one ``UPDATE``.
    * :meth:`plain` is the transaction's connection for constant Core statements (module constants built with
      ``bindparam``; on a SQLite file they run prepared, ``store.prepared``): the queue, the log, request records.
    * :meth:`orm` is an ORM session on the same transaction, for code that works with model objects (messages,
      runs, tool calls); it connects on first use, so a transaction that needs none never makes one.
      :meth:`insert` and :meth:`get` write and read such objects with one prepared statement each.
    * :meth:`emit` appends a durable event; :meth:`finish` writes the row, the events, the client request records
      and the owner's feed event before the commit.
    """

    _session: WriteSession
    row: SessionRow
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
    # The ORM session was handed out: flush it before plain statements.
    _orm_used: bool = False
    # The plain rows of the run's tables this transaction reads or stores (``store.run_rows``), by table and
    # key, each with its values as last written: what changed since is written before the next plain statement.
    # A row staged (:meth:`stage`) and not written yet has None for its values.
    _rows: dict[tuple[type[Any], tuple[Any, ...]], tuple[PlainRow, tuple[Any, ...] | None]] = field(
        default_factory=dict
    )

    async def plain(self) -> PlainConnection:
        """The connection for constant Core statements, with everything the transaction changed through the ORM
        or in its plain rows (:meth:`load`) written first (plain statements see it). The session row's changes
        are written by :meth:`finish`."""
        if self._orm_used:
            await self._session.flush()
        db = self._session.plain
        if self._rows:
            rows = self._rows
            for key, (row, stored) in rows.items():
                now = await run_rows.write_changes(db, row, stored)
                if now is not stored:
                    rows[key] = (row, now)
        return db

    async def load(self, cls: type[PlainRowT], *key: Any) -> PlainRowT | None:
        """The plain row of ``cls`` (``store.run_rows``) with primary key ``key``: read with one prepared
        statement the first time, then the same object for the rest of the transaction. Change its columns and
        they are written before the next plain statement (at the latest before the commit), one ``UPDATE``."""
        known = self._rows.get((cls, key))
        if known is not None:
            return known[0]  # type: ignore[return-value]
        row = await run_rows.get(await self.plain(), cls, *key)
        if row is not None:
            self._rows[(cls, key)] = (row, run_rows.values_of(row))
        return row

    def adopt(self, rows: list[PlainRowT]) -> list[PlainRowT]:
        """Rows a plain query of this transaction just read, as the transaction's own (one object per row: one
        it already has stands for the copy just read), whose changes it writes as :meth:`load`'s."""
        out = []
        for row in rows:
            key = (type(row), run_rows.key_of(row))
            known = self._rows.get(key)
            if known is None:
                self._rows[key] = (row, run_rows.values_of(row))
                out.append(row)
            else:
                out.append(known[0])  # type: ignore[arg-type]
        return out

    async def add(self, *rows: CallRow) -> None:
        """Store new tool calls with one prepared ``INSERT`` each; they are the transaction's, as :meth:`load`'s."""
        db = await self.plain()
        for row in rows:
            await run_rows.insert(db, row)
            self._rows[(CallRow, run_rows.key_of(row))] = (row, run_rows.values_of(row))

    def stage(self, row: RunRow) -> None:
        """Store a new run with the transaction's next plain statement (at the latest before the commit), with the
        values it has then: what the transaction changes in it before that (a step it starts) costs no ``UPDATE``.
        It is the transaction's, as :meth:`load`'s rows."""
        self._rows[(RunRow, run_rows.key_of(row))] = (row, None)

    def track(self, row: object) -> None:
        """Have the changes made from now on to ``row`` written with the transaction: call it before changing a
        plain row that may come from elsewhere (one a transition stored); an ORM object is the ORM's to write."""
        if not isinstance(row, (MessageRow, RunRow, CallRow)):
            return
        key = (type(row), run_rows.key_of(row))
        if key not in self._rows:
            self._rows[key] = (row, run_rows.values_of(row))

    async def orm(self) -> AsyncSession:
        """The ORM session on this transaction (see the class doc)."""
        self._orm_used = True
        return self._session

    def emit(self, event: Event) -> EventEnvelope:
        """Append ``event`` (made by a constructor of ``domain.events``) to the session's log, at the next seq."""
        # The row's last_seq moves in memory only; ``finish`` writes it (and the log rows) with plain
        # statements (``store.eventlog``).
        seq = eventlog.next_seq(self.row.last_seq)
        self.row.stored(last_seq=seq)
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
        return await self.ledger.replay(await self.plain(), key, kind, expand)

    def remember(self, key: RequestKey | None, kind: requests.Receipt[ReceiptT, ReplyT], receipt: ReceiptT) -> None:
        """Record ``receipt`` (what rebuilds the reply, of ``kind``) for the client request ``key``, committed with
        this transaction; a repeat of ``key`` within this transaction gets the reply rebuilt from it."""
        self.ledger.remember(key, kind, receipt)

    async def get(self, model: type[ModelT], *key: Any) -> ModelT | None:
        """The row of ``model`` with primary key ``key``, loaded with one prepared statement (``repo.load``)."""
        return await repo.load(await self.orm(), await self.plain(), model, key)

    async def insert(self, *rows: Any) -> None:
        """Write new ORM objects (every column set, or left to its Python default) with one prepared
        ``INSERT`` each and add them to the ORM session as persistent, unchanged objects."""
        db, session = await self.plain(), await self.orm()
        for row in rows:
            await db.execute(*repo.insert_values(row))
            make_transient_to_detached(row)
            session.add(row)

    async def finish(self) -> None:
        """Before the commit: the row's changed columns, then the request records, the log and the feed."""
        db = await self.plain()
        now = utcnow()
        if self.events:
            # The log's new end, the time of the change and the unread marks are written with the row's other
            # changed columns: one ``UPDATE``.
            self.row.last_seq, self.row.updated_at = self.row.last_seq, now
            self.seen_in_view = await unread.note(self.row, self.events, self.visible)
        await session_row.write_changes(db, self.row)
        if not self.ledger.rows and not self.events:
            return
        await self.ledger.write(db)
        if not self.events:
            return
        await eventlog.append(db, self.events, now, self.retention)
        await self._feed(db, now)

    async def _feed(self, db: PlainConnection, now: datetime) -> None:
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


def can_read(user: User, row: SessionFields) -> bool:
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
        self.observers: list[Callable[[SessionTx], None]] = []

    @asynccontextmanager
    async def session(
        self,
        user: User | None,
        session_id: str,
        *,
        missing: Callable[[str], Exception] | None = None,
        head_only: bool = False,
    ) -> AsyncIterator[SessionTx]:
        """Lock the caller's session, yield a :class:`SessionTx`, commit, then publish its events.

        Someone else's session is ``NOT_FOUND``: we do not reveal that it exists. ``user=None`` is the server
        itself (background work such as model titles, the engine): no owner to check. ``missing`` makes the
        exception raised when the session does not exist (or is not the user's) instead of ``NOT_FOUND``.
        ``head_only``: ``tx.row`` has only the columns of ``session_row.HEAD`` (for a write that needs none of
        the session's settings, lease or usage: the queue's edits, the busiest writes).
        """
        async with self.db.write() as s:
            locked = await session_row.lock(s.plain, session_id, head_only=head_only)
            row = self._owned(locked, user, session_id, missing)
            tx = SessionTx(
                s,
                row,
                self.retention,
                max_active_runs=self.max_active_runs,
                visible=self.visible,
                ledger=requests.Ledger(self.max_request_records),
            )
            yield tx
            await tx.finish()
        await self.publish_tx(tx)

    @staticmethod
    def _owned(
        row: SessionRow | None, user: User | None, session_id: str, missing: Callable[[str], Exception] | None = None
    ) -> SessionRow:
        """``row`` when the session exists and is ``user``'s (any session for ``user=None``)."""
        if row is None or (user is not None and row.owner_id != user.id):
            raise RpcError("NOT_FOUND", "Session not found") if missing is None else missing(session_id)
        return row

    async def publish_tx(self, tx: SessionTx) -> None:
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
