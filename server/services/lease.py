"""One run per session, cluster-wide (an invariant of docs/architecture.md).

The lease lives on the session row: ``run_id`` (the run in progress), ``lease_owner`` (the process driving
it) and ``lease_expires_at``. Every change happens under the session row lock (``SELECT ... FOR UPDATE`` on
PostgreSQL, the single writer on SQLite), so "check, then set" is a compare-and-set.

Rules, and the failure each prevents:

* A run is *claimed* only in the transaction that starts or resumes it, and only while no other process
  holds a live lease for it — two replicas receiving work for one session cannot both run it.
* A run that is waiting for people (``requires-action``) holds no lease: any replica can resume it when the
  last tool output or approval arrives.
* The owner renews the lease while the run is alive (each flush); every write of the run is *fenced*: it
  checks, under the lock, that this process still owns ``run_id``. A process that stalled past its expiry and
  was replaced by the sweeper stops without writing, so a recovered session never gets a second writer.
* ``abort_requested`` is how an abort reaches the owner on another replica: it polls the flag.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

from sqlalchemy import bindparam, update

from ..store.models import ChatSession, Message, utcnow
from .uow import SessionTx, UnitOfWork


class SessionGone(Exception):
    """The session was deleted (or never existed)."""


class LeaseLost(Exception):
    """This process no longer owns the run: another replica took over, or the run ended elsewhere."""


def new_owner_id() -> str:
    """Unique per process start: a restarted process must not mistake its predecessor's lease for its own."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def claim(row: ChatSession, owner: str, seconds: float) -> None:
    row.lease_owner = owner
    row.lease_expires_at = utcnow() + timedelta(seconds=seconds)


def release(row: ChatSession) -> None:
    row.lease_owner = None
    row.lease_expires_at = None


def lease_live(row: ChatSession, now: datetime | None = None) -> bool:
    return row.lease_owner is not None and row.lease_expires_at is not None and row.lease_expires_at > (now or utcnow())


@asynccontextmanager
async def fenced_tx(
    uow: UnitOfWork, session_id: str, run_id: str, owner: str, lease_seconds: float
) -> AsyncIterator[SessionTx]:
    """A unit of work of a run: only while this process owns it; renews the lease on the way."""
    async with uow.session(None, session_id, missing=LeaseLost) as tx:
        if tx.row.run_id != run_id or tx.row.lease_owner != owner:
            raise LeaseLost(session_id)
        claim(tx.row, owner, lease_seconds)
        yield tx


_SESSIONS, _MESSAGES = ChatSession.__table__, Message.__table__
# Built once: the heartbeat runs every second of every streaming run, and on SQLite it runs on the loop, so
# its cost is latency added to whichever token arrives meanwhile.
_RENEW_LEASE = (
    update(_SESSIONS)
    .where(
        _SESSIONS.c.id == bindparam("sid"),
        _SESSIONS.c.run_id == bindparam("rid"),
        _SESSIONS.c.lease_owner == bindparam("owner"),
        _SESSIONS.c.deleted_at.is_(None),
    )
    .values(lease_expires_at=bindparam("until"))
    .returning(_SESSIONS.c.abort_requested)
)
_FLUSH_TEXT = (
    update(_MESSAGES)
    .where(_MESSAGES.c.id == bindparam("mid"), _MESSAGES.c.status == "streaming")
    .values(content=bindparam("text"))
)


async def heartbeat(
    uow: UnitOfWork, session_id: str, run_id: str, owner: str, lease_seconds: float, flush: tuple[str, str] | None
) -> bool:
    """Renew the lease and write the partial text ``flush = (message_id, text)``, without an event.

    Returns ``abort_requested``; raises :class:`LeaseLost` when this process no longer owns the run.
    """
    async with uow.db.write_connection() as conn:
        abort = (
            await conn.execute(
                _RENEW_LEASE,
                {
                    "sid": session_id,
                    "rid": run_id,
                    "owner": owner,
                    "until": utcnow() + timedelta(seconds=lease_seconds),
                },
            )
        ).scalar_one_or_none()
        if abort is None:
            raise LeaseLost(session_id)
        if flush is not None:
            message_id, text = flush
            await conn.execute(_FLUSH_TEXT, {"mid": message_id, "text": text})
        return bool(abort)
