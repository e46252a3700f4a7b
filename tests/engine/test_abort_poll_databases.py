"""The batched abort poll (``engine.abort_poll.AbortPolls``) on both databases: its statement differs between
SQLite (``json_each``) and PostgreSQL (``= ANY``), and each run must learn only its own session's flag."""

from __future__ import annotations

import asyncio
import uuid

from server.engine.abort_poll import AbortPolls
from server.store.db import Database
from server.store.models import ChatSession, User


async def test_one_read_answers_each_session_on_both_databases(migrated_db: Database) -> None:
    async with migrated_db.write() as s:
        user = User(id=str(uuid.uuid4()), name=f"u-{uuid.uuid4().hex[:8]}")
        s.add(user)
        await s.flush()
        rows = [ChatSession(id=str(uuid.uuid4()), owner_id=user.id, abort_requested=i == 1) for i in range(3)]
        s.add_all(rows)
    polls = AbortPolls(migrated_db)
    ids = [r.id for r in rows] + [str(uuid.uuid4())]  # the last: a session that is gone
    assert await asyncio.gather(*(polls.asked(sid) for sid in ids)) == [False, True, False, False]
    assert polls.reads == 1
