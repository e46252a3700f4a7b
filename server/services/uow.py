"""The unit of work behind every session mutation: state change + event-log append in one transaction,
publish after commit (a transactional outbox; ARCHITECTURE.md invariant 2)."""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from ..domain.events import EventEnvelope
from ..protocol.errors import RpcError
from ..pubsub.base import Bus
from ..store import repo
from ..store.db import Database
from ..store.models import ChatSession, Event, User, utcnow

log = logging.getLogger(__name__)

TRIM_EVERY = 64  # trim the retained log once per this many events, not on every append


@dataclass
class SessionTx:
    """An open transaction on one locked session. ``emit`` appends a durable event to its log."""

    db: AsyncSession
    row: ChatSession
    retention: int
    events: list[EventEnvelope] = field(default_factory=list)

    def emit(self, type_: str, **fields: Any) -> EventEnvelope:
        self.row.last_seq += 1
        env = EventEnvelope.build(self.row.id, self.row.last_seq, type_, fields)
        self.db.add(Event(session_id=self.row.id, seq=env.seq, type=type_, payload=env.json, created_at=utcnow()))
        self.events.append(env)
        return env

    async def finish(self) -> None:
        if not self.events:
            return
        self.row.updated_at = utcnow()
        last = self.row.last_seq
        if last > self.retention and last // TRIM_EVERY != (last - len(self.events)) // TRIM_EVERY:
            await repo.trim_events(self.db, self.row.id, last - self.retention)
        await self.db.flush()


def can_read(user: User, row: ChatSession) -> bool:
    return row.owner_id == user.id or user.role == "admin"


class UnitOfWork:
    def __init__(self, db: Database, bus: Bus, retention: int) -> None:
        self.db = db
        self.bus = bus
        self.retention = retention

    @asynccontextmanager
    async def session(self, user: User | None, session_id: str) -> AsyncIterator[SessionTx]:
        """Lock the caller's session, yield a :class:`SessionTx`, commit, then publish its events.

        Someone else's session is ``NOT_FOUND``: we do not reveal that it exists. ``user=None`` is the server
        itself (background work such as model titles): no owner to check.
        """
        async with self.db.write() as s:
            row = await repo.get_session(s, session_id, lock=True)
            if row is None or (user is not None and row.owner_id != user.id):
                raise RpcError("NOT_FOUND", "Session not found")
            tx = SessionTx(s, row, self.retention)
            yield tx
            await tx.finish()
        await self.publish(session_id, tx.events)

    async def publish(self, session_id: str, events: list[EventEnvelope]) -> None:
        """Best effort: a lost publish is repaired by subscribers reading the log, so never fail the call."""
        if not events:
            return
        try:
            await self.bus.publish(session_id, events)
        except Exception:
            log.warning("publish to %s failed; subscribers will catch up from the log", session_id, exc_info=True)
