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

import asyncio
import os
import socket
import time
import uuid
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import String, any_, bindparam, column, func, select, update
from sqlalchemy.dialects import postgresql

from ..store.db import Database
from ..store.models import ChatSession, Message, utcnow
from ..store.session_row import SessionFields
from .uow import SessionTx, UnitOfWork


class SessionGone(Exception):
    """The session was deleted (or never existed)."""


class LeaseLost(Exception):
    """This process no longer owns the run: another replica took over, or the run ended elsewhere."""


def new_owner_id() -> str:
    """Unique per process start: a restarted process must not mistake its predecessor's lease for its own."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def claim(row: SessionFields, owner: str, seconds: float) -> None:
    row.lease_owner = owner
    row.lease_expires_at = utcnow() + timedelta(seconds=seconds)


def release(row: SessionFields) -> None:
    row.lease_owner = None
    row.lease_expires_at = None


def lease_live(row: SessionFields, now: datetime | None = None) -> bool:
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
# One statement renews the leases of every run this process streams, each tick (``Heartbeats``): the ids come
# as one parameter (a JSON array on SQLite, a text array on PostgreSQL), so the statement is a constant,
# prepared once. Only the sessions named are renewed (a lease this process holds but no loop drives any
# more must lapse, so that the sweeper recovers its run); the loops check the run id it returns.
_RETURNING = (_SESSIONS.c.id, _SESSIONS.c.run_id, _SESSIONS.c.abort_requested)
_LEASED_BY = (_SESSIONS.c.lease_owner == bindparam("owner"), _SESSIONS.c.deleted_at.is_(None))
_RENEW_SQLITE = (
    update(_SESSIONS)
    .where(*_LEASED_BY, _SESSIONS.c.id.in_(select(column("value")).select_from(func.json_each(bindparam("ids")))))
    .values(lease_expires_at=bindparam("until"))
    .returning(*_RETURNING)
)
_RENEW_POSTGRES = (
    update(_SESSIONS)
    .where(*_LEASED_BY, _SESSIONS.c.id == any_(bindparam("ids", type_=postgresql.ARRAY(String))))
    .values(lease_expires_at=bindparam("until"))
    .returning(*_RETURNING)
)
# PostgreSQL locks each row it updates until the commit: a batch that waited for a row another transaction holds
# would hold every row it already renewed meanwhile, and the writers of those sessions would queue behind it.
# So the batch takes the rows free now (SKIP LOCKED); a row that was busy is renewed alone afterwards.
_RENEW_POSTGRES_FREE = (
    update(_SESSIONS)
    .where(
        _SESSIONS.c.id.in_(
            select(_SESSIONS.c.id)
            .where(*_LEASED_BY, _SESSIONS.c.id == any_(bindparam("ids", type_=postgresql.ARRAY(String))))
            .with_for_update(skip_locked=True)
        )
    )
    .values(lease_expires_at=bindparam("until"))
    .returning(*_RETURNING)
)
_FLUSH_TEXT = (
    update(_MESSAGES)
    .where(_MESSAGES.c.id == bindparam("mid"), _MESSAGES.c.status == "streaming")
    .values(content=bindparam("text"))
)


@dataclass
class _Beat:
    session_id: str
    run_id: str
    flush: tuple[str, str] | None
    done: asyncio.Future[bool]


class Heartbeats:
    """The heartbeats of every run this process drives, written together: the run loops tick on a shared
    clock (:func:`next_tick`), each hands its beat to :meth:`beat`, and the beats of one tick go out in one
    transaction — one statement renewing every lease, one ``executemany`` writing every partial text — instead
    of a transaction per run."""

    def __init__(self, db: Database, owner: str, lease_seconds: float) -> None:
        self.db = db
        self.owner = owner
        self.lease_seconds = lease_seconds
        self._pending: list[_Beat] = []
        self._writing: asyncio.Task[None] | None = None

    async def beat(self, session_id: str, run_id: str, flush: tuple[str, str] | None) -> bool:
        """Renew the lease of ``run_id`` and write the partial text ``flush = (message_id, text)``, without an
        event; returns ``abort_requested``. Raises :class:`LeaseLost` when this process no longer owns the run."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append(_Beat(session_id, run_id, flush, done))
        if self._writing is None:
            self._writing = asyncio.create_task(self._write(), name="heartbeats")
        return await done

    async def _renew(self, beats: list[_Beat], renew: Any) -> dict[str, tuple[str, bool]]:
        """One transaction: renew the leases of ``beats`` with ``renew``, write the partial texts of those still
        this process's; returns what the statement found, session id -> (run id, abort requested)."""
        ids = [b.session_id for b in beats]
        params = {
            "owner": self.owner,
            "until": utcnow() + timedelta(seconds=self.lease_seconds),
            "ids": ids if not self.db.is_sqlite else orjson.dumps(ids).decode(),
        }
        async with self.db.write() as write:
            conn = write.plain
            held = {sid: (rid, bool(abort)) for sid, rid, abort in (await conn.execute(renew, params)).all()}
            ours = [b for b in beats if held.get(b.session_id, (None,))[0] == b.run_id]
            texts = [{"mid": b.flush[0], "text": b.flush[1]} for b in ours if b.flush is not None]
            if texts:
                await conn.execute(_FLUSH_TEXT, texts)
        return held

    async def _write(self) -> None:
        await asyncio.sleep(0)  # the beats of every loop that woke on this tick
        beats, self._pending, self._writing = self._pending, [], None
        try:
            if self.db.is_sqlite:  # one writer at a time: no row is ever busy
                held = await self._renew(beats, _RENEW_SQLITE)
            else:
                held = await self._renew(beats, _RENEW_POSTGRES_FREE)
                for b in beats:
                    if b.session_id not in held:  # busy, or not this process's: alone, waiting for its row
                        held.update(await self._renew([b], _RENEW_POSTGRES))
        except BaseException as error:
            for b in beats:
                if not b.done.done():
                    b.done.set_exception(error if isinstance(error, Exception) else asyncio.CancelledError())
            if not isinstance(error, Exception):
                raise
            return
        for b in beats:
            found = held.get(b.session_id)
            if b.done.done():  # its loop stopped waiting (cancelled)
                continue
            if found is None or found[0] != b.run_id:
                b.done.set_exception(LeaseLost(b.session_id))
            else:
                b.done.set_result(bool(found[1]))


def next_tick(interval: float) -> float:
    """Seconds until the next tick of a clock shared by every loop of this process that ticks every
    ``interval`` seconds, so their heartbeats fall due together (:class:`Heartbeats`)."""
    return interval - time.monotonic() % interval


_HEARTBEATS: weakref.WeakKeyDictionary[UnitOfWork, dict[tuple[str, float], Heartbeats]] = weakref.WeakKeyDictionary()


async def heartbeat(
    uow: UnitOfWork, session_id: str, run_id: str, owner: str, lease_seconds: float, flush: tuple[str, str] | None
) -> bool:
    """Renew the lease and write the partial text ``flush = (message_id, text)``, without an event, together
    with the other heartbeats of this process due now (:class:`Heartbeats`).

    Returns ``abort_requested``; raises :class:`LeaseLost` when this process no longer owns the run.
    """
    mine = _HEARTBEATS.setdefault(uow, {})
    beats = mine.get((owner, lease_seconds))
    if beats is None:
        beats = mine[(owner, lease_seconds)] = Heartbeats(uow.db, owner, lease_seconds)
    return await beats.beat(session_id, run_id, flush)
