"""Purging deleted sessions, so what a user deletes stops taking room.

``session.delete`` marks the session (``deleted_at``) and removes at once the files no other live session
carries (``Files.forget_session``). Everything else of the session stays for
``CHATSYNC_DELETED_SESSION_RETENTION_SECONDS`` (a minute): a subscriber still catching up reads the session's
log up to its ``session-deleted``. Then :class:`Purger` removes the session's row, and the database removes
with it (``ON DELETE CASCADE``) its messages, events, queued messages, runs, tool calls and file references;
files that only deleted sessions carried go first, by the same locked path as the collector's.

Every replica runs the purge, every ``CHATSYNC_PURGE_SWEEP_SECONDS`` (a minute), and the work is safe to
share: each session is purged in a transaction of its own that first locks its row, skipping a row another
replica holds (``FOR UPDATE SKIP LOCKED``; on SQLite the one write lock serialises them), and deletes it only
while it is marked deleted. Purging a session twice, or one that is gone, does nothing.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from datetime import datetime, timedelta

from sqlalchemy import delete, select

from ..files import Files
from ..settings import Settings
from ..store.db import Database
from ..store.models import ChatSession, utcnow

log = logging.getLogger(__name__)

BATCH = 100  # deleted sessions looked up at a time

_SESSIONS = ChatSession.__table__


class Purger:
    """One per process; an async context manager that purges deleted sessions in the background."""

    def __init__(self, db: Database, files: Files, settings: Settings) -> None:
        self.db = db
        self.files = files
        self.retention = timedelta(seconds=settings.deleted_session_retention_seconds)
        self.every = settings.purge_sweep_seconds
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def __aenter__(self) -> Purger:
        self._task = asyncio.create_task(self._purge_forever())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def purge(self, now: datetime | None = None) -> int:
        """Purge every session deleted more than the retention before ``now``; returns how many this call
        purged (another replica may have taken some)."""
        cutoff = (now or utcnow()) - self.retention
        due = (
            select(_SESSIONS.c.id)
            .where(_SESSIONS.c.deleted_at.is_not(None), _SESSIONS.c.deleted_at <= cutoff)
            .limit(BATCH)
        )
        purged = 0
        while True:
            async with self.db.read() as s:
                ids = list((await s.execute(due)).scalars())
            done = [await self._purge_one(sid) for sid in ids]
            purged += sum(done)
            # A short batch was the last; a batch another replica took entirely leaves the rest to it.
            if len(ids) < BATCH or not any(done):
                return purged

    async def purge_session(self, session_id: str) -> bool:
        """Purge one deleted session now (files first); False when it is not deleted, gone, or being purged."""
        await self.files.forget_session(session_id)
        async with self.db.write() as s:
            locked = (
                select(_SESSIONS.c.id)
                .where(_SESSIONS.c.id == session_id, _SESSIONS.c.deleted_at.is_not(None))
                .with_for_update(skip_locked=True)
            )
            if (await s.execute(locked)).first() is None:
                return False
            await s.execute(delete(_SESSIONS).where(_SESSIONS.c.id == session_id))
        return True

    async def _purge_one(self, session_id: str) -> bool:
        try:
            return await self.purge_session(session_id)
        except Exception:  # the others go on; this one is tried again at the next sweep
            log.warning("purging deleted session %s failed", session_id, exc_info=True)
            return False

    async def _purge_forever(self) -> None:
        while not self._stop.is_set():
            try:
                await self.purge()
            except Exception:
                log.warning("purging deleted sessions failed", exc_info=True)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.every)
