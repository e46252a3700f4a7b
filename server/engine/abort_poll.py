"""Whether another replica asked to stop a run, read for every run of this process at once.

``run.abort`` on a replica that does not drive the run sets ``abort_requested`` on the session row; the driving
replica's run loops read it between heartbeats (``abort_poll_seconds``). The loops tick on a shared clock
(``lease.next_tick``), so the polls of one tick arrive together: :class:`AbortPolls` answers them with one read
(``SELECT id ... WHERE id IN (...) AND abort_requested``) instead of a read per streaming session, which at four
polls a second was most of what a streaming session cost PostgreSQL between its writes.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from ..store.db import Database, listed
from ..store.models import ChatSession

_SESSIONS = ChatSession.__table__
# The sessions named (one parameter, ``db.listed``) whose abort was asked for, as SQLite and PostgreSQL take it.
_ASKED = {
    sqlite: select(_SESSIONS.c.id).where(
        _SESSIONS.c.abort_requested.is_(True), listed(_SESSIONS.c.id, "ids", sqlite=sqlite)
    )
    for sqlite in (True, False)
}


class AbortPolls:
    """Batches the abort polls of one loop turn into one read (see the module doc)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._pending: dict[str, list[asyncio.Future[bool]]] = {}
        self._reading: asyncio.Task[None] | None = None
        self.reads = 0  # statements run (for tests: many polls, one read)

    async def asked(self, session_id: str) -> bool:
        """Whether an abort of ``session_id``'s run was asked for (``abort_requested``)."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(session_id, []).append(done)
        if self._reading is None:
            self._reading = asyncio.create_task(self._read(), name="abort-polls")
        return await done

    async def _read(self) -> None:
        await asyncio.sleep(0)  # the polls of every loop that woke on this tick
        pending, self._pending, self._reading = self._pending, {}, None
        ids = list(pending)
        try:
            self.reads += 1
            db = self.db
            asked = {row[0] for row in await db.read_rows(_ASKED[db.is_sqlite], {"ids": db.listed_value(ids)})}
        except BaseException as error:
            for waiters in pending.values():
                for w in waiters:
                    if not w.done():
                        w.set_exception(error if isinstance(error, Exception) else asyncio.CancelledError())
            if not isinstance(error, Exception):
                raise
            return
        for sid, waiters in pending.items():
            for w in waiters:
                if not w.done():  # its loop stopped waiting (cancelled)
                    w.set_result(sid in asked)
