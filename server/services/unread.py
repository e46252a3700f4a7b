"""Unread: what in a session its owner has not looked at yet, the same on every device.

A session wants its owner's attention when a run finishes (an answer), fails, or asks for an approval. The
transaction that commits such an event records it on the session row (``attention_seq``: the event's seq, and
``attention_kind``: ``answer``, ``failure`` or ``approval``), and the session is unread while that is past what
the owner has seen (``seen_seq``). It is written in the same transaction as the event, with the row's other
changes and before the feed event of that transaction is made (``uow.SessionTx.finish``), so ``session.feed`` and
``session.list`` carry ``unread`` and every device's list agrees.

Looking at a session clears it on every device: a device that has the session visible (``presence.update``
with ``visible``) or calls ``session.markRead`` moves ``seen_seq`` to the session's end, and the feed says so.
When a device has the session visible at the moment the event commits, the event is seen at once and the
session never shows as unread. An approval decided (on any device, or from a notification) is seen too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import bindparam, select

from ..domain import events as ev
from ..domain.events import EventEnvelope
from ..protocol.errors import RpcError
from ..store import eventlog, repo
from ..store.db import Database
from ..store.models import ChatSession, User, utcnow
from ..store.session_row import SessionRow
from . import feed

if TYPE_CHECKING:
    from .uow import UnitOfWork

log = logging.getLogger(__name__)

Visible = Callable[[str, str], Awaitable[bool]]
"""``(owner id, session id)``: whether a device of the owner has the session in view now."""

# The events that want the owner's attention, and what each is called on the wire.
ATTENTION: dict[str, str] = {"run-finished": "answer", "run-failed": "failure", "tool-approval-requested": "approval"}
# How long the check of presence may hold the committing transaction; past it the event counts as unseen.
VISIBLE_CHECK_SECONDS = 0.5

_SESSIONS = ChatSession.__table__
_STATE = select(_SESSIONS.c.owner_id, _SESSIONS.c.attention_seq, _SESSIONS.c.seen_seq, _SESSIONS.c.last_seq).where(
    _SESSIONS.c.id == bindparam("sid"), _SESSIONS.c.deleted_at.is_(None)
)


async def note(row: SessionRow, events: Sequence[EventEnvelope], visible: Visible | None) -> bool:
    """In the committing transaction: record the newest event of ``events`` that wants attention, seen at once
    when a device has the session visible; an approval decided counts as a look. The marks are set on ``row``
    as changed columns, so the row's one ``UPDATE`` (``SessionTx.finish``) writes them with its other changes.
    True when such an event was seen at once (no notification is then sent, ``services.push``)."""
    latest: EventEnvelope | None = None
    decided = False
    for env in events:
        if env.type in ATTENTION:
            latest = env
        elif env.type == "tool-approval-resolved":
            decided = True
    if latest is None and not (decided and row.attention_kind == "approval"):
        return False
    attention_seq, kind, seen_seq = int(row.attention_seq or 0), row.attention_kind, int(row.seen_seq or 0)
    in_view = False
    if latest is not None:
        attention_seq, kind = int(latest.seq or 0), ATTENTION[latest.type]
        in_view = visible is not None and await _in_view(visible, row.owner_id, row.id)
        if in_view:
            seen_seq = attention_seq
    else:
        seen_seq = max(seen_seq, attention_seq)
    row.attention_seq, row.attention_kind, row.seen_seq = attention_seq, kind, seen_seq
    return in_view


async def _in_view(visible: Visible, owner_id: str, session_id: str) -> bool:
    try:
        # Not ``asyncio.wait_for``: on Python 3.11 it returns the answer instead of raising when the caller is
        # cancelled just as the answer arrives, and the transaction would then commit for a task that is to stop.
        async with asyncio.timeout(VISIBLE_CHECK_SECONDS):
            return await visible(owner_id, session_id)
    except Exception:  # presence unreachable: the owner gets the mark rather than losing it
        log.warning("presence of %s unknown; marking it unread", session_id, exc_info=True)
        return False


class UnreadService:
    """What the owner has not seen in a session, the same on every device: marking read, and the unread marks."""

    def __init__(self, db: Database, uow: UnitOfWork) -> None:
        self.db = db
        self.uow = uow

    async def mark_read(self, user: User, session_id: str) -> bool:
        """The owner looked at the session: everything in it is seen, on every device (one feed event). False
        when nothing was unread (then nothing is written). Someone else's session is ``NOT_FOUND``."""
        async with self.db.read() as s:
            found = (await s.execute(_STATE, {"sid": session_id})).first()
        if found is None or found.owner_id != user.id:
            raise RpcError("NOT_FOUND", "Session not found")
        if found.attention_seq <= found.seen_seq:
            return False
        async with self.db.write() as s:
            row = await repo.get_session(s, session_id, lock=True)
            if row is None or row.owner_id != user.id:
                raise RpcError("NOT_FOUND", "Session not found")
            if row.attention_seq <= row.seen_seq:
                return False
            row.seen_seq = row.last_seq
            await s.flush()
            summary = feed.summary(row, await feed.queue_length(s, session_id))
            env = await eventlog.append_feed(s, user.id, ev.feed_session_updated(session_id, summary), utcnow())
        await self.uow.publish(feed.channel(user.id), [env])
        return True
