"""One-statement reads (``Database.read_rows``) on both databases: the rows of a list parameter (``db.listed``),
typed as the ORM reads them (timestamps with their zone, JSON decoded, booleans), and none for names not there."""

from __future__ import annotations

import uuid

from sqlalchemy import select

from server.store.db import Database, listed
from server.store.models import ChatSession, User

_SESSIONS = ChatSession.__table__
_COLUMNS = ("id", "created_at", "tools", "pinned")
_READ = {
    sqlite: select(*(_SESSIONS.c[name] for name in _COLUMNS))
    .where(listed(_SESSIONS.c.id, "ids", sqlite=sqlite))
    .order_by(_SESSIONS.c.id)
    for sqlite in (True, False)
}


async def test_rows_of_a_listed_parameter_come_back_typed_as_the_orm_reads_them(migrated_db: Database) -> None:
    db = migrated_db
    async with db.write() as s:
        user = User(id=str(uuid.uuid4()), name=f"u-{uuid.uuid4().hex[:8]}")
        s.add(user)
        await s.flush()
        sessions = [
            ChatSession(id=str(uuid.uuid4()), owner_id=user.id, tools=[{"name": f"t{i}"}], pinned=i == 0)
            for i in range(3)
        ]
        s.add_all(sessions)
    wanted = sorted(r.id for r in sessions[:2])
    rows = await db.read_rows(_READ[db.is_sqlite], {"ids": db.listed_value([*wanted, str(uuid.uuid4())])})
    async with db.read() as s:
        orm = (await s.execute(select(ChatSession).where(ChatSession.id.in_(wanted)).order_by(ChatSession.id))).all()
        expected = [tuple(getattr(r[0], name) for name in _COLUMNS) for r in orm]
    assert [tuple(r) for r in rows] == expected and len(expected) == 2
    assert all(r[1].tzinfo is not None and isinstance(r[2], list) and isinstance(r[3], bool) for r in rows)
    assert await db.read_rows(_READ[db.is_sqlite], {"ids": db.listed_value([])}) == []
