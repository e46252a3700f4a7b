"""A user's feed log (``store.eventlog.append_feed``, one statement on PostgreSQL): writers that append at once,
in one process or in several (replicas on one PostgreSQL database), get the seqs 1, 2, 3, ... each once, with the
end on the user row equal to the newest event."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import select
from sqlalchemy.exc import NoResultFound

from server.domain import events
from server.store import eventlog
from server.store.db import Database
from server.store.models import User, UserEvent, utcnow

WRITERS = 4  # per process
APPENDS = 8  # per writer


async def _user(db: Database) -> str:
    user_id = str(uuid.uuid4())
    async with db.write() as s:
        s.add(User(id=user_id, name=f"u-{user_id[:8]}", role="user"))
    return user_id


async def test_concurrent_appends_get_every_seq_once_and_the_end_follows(migrated_db: Database) -> None:
    user_id = await _user(migrated_db)
    # On PostgreSQL a second process (its own pool, as another replica's) appends too, and every writer's
    # transaction is open before any appends, so they meet on the user row's lock. On SQLite a process's writers
    # take turns holding the database's write lock: they cannot all be inside a transaction at once.
    on_pg = not migrated_db.is_sqlite
    async with Database(migrated_db.url) as other:
        processes = [migrated_db, other] if on_pg else [migrated_db]
        writers = [db for db in processes for _ in range(WRITERS)]
        barrier = asyncio.Barrier(len(writers)) if on_pg else None
        got: list[int] = []

        async def writer(db: Database, n: int) -> None:
            for i in range(APPENDS):
                async with db.write() as s:
                    if barrier is not None:
                        await barrier.wait()
                    event = events.feed_session_deleted(f"s-{n}-{i}")
                    # Through the ORM session on odd turns (as ``UnreadService.mark_read`` appends), else the plain
                    # connection (a session's unit of work).
                    executor = s if i % 2 else s.plain
                    env = await eventlog.append_feed(executor, user_id, event, utcnow())
                assert env.seq is not None
                got.append(env.seq)

        await asyncio.wait_for(asyncio.gather(*(writer(db, n) for n, db in enumerate(writers))), 60)

    total = len(writers) * APPENDS
    assert sorted(got) == list(range(1, total + 1))
    async with migrated_db.read() as r:
        stored = (await r.execute(select(UserEvent.seq).where(UserEvent.user_id == user_id))).scalars().all()
        end = (await r.execute(select(User.feed_seq).where(User.id == user_id))).scalar_one()
    assert sorted(stored) == list(range(1, total + 1))
    assert end == total


async def test_an_append_for_a_user_that_is_gone_fails_and_writes_nothing(migrated_db: Database) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises((LookupError, NoResultFound)):  # the prepared path's and SQLAlchemy's "no row"
        async with migrated_db.write() as s:
            await eventlog.append_feed(s.plain, missing, events.feed_session_deleted("s"), utcnow())
    async with migrated_db.read() as r:
        assert (await r.execute(select(UserEvent).where(UserEvent.user_id == missing))).first() is None
