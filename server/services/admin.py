"""What the admin API reads from the database beyond a session's snapshot and its event log: every user's
sessions with their owners, queue lengths and leases, one session's owner, lease and log end, and totals over
the whole database. Everything here reads; nothing changes state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..protocol.errors import RpcError
from ..store import repo
from ..store.db import Database
from ..store.models import ChatSession, User
from .sessions import decode_cursor, encode_cursor


class AdminReads:
    """The admin API's database reads, as the JSON it answers with (times in ms since the epoch)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def sessions(
        self, *, owner: str | None, status: str | None, limit: int, cursor: str | None
    ) -> dict[str, Any]:
        """One page of every user's sessions, newest first (pinned or not), with ``nextCursor`` for the next."""
        after = decode_cursor(cursor)[1:] if cursor else None
        async with self.db.read() as s:
            rows = await repo.admin_list_sessions(s, owner=owner, status=status, limit=limit + 1, after=after)
        page = rows[:limit]
        now = datetime.now(UTC)
        items = [
            {
                **repo.session_wire(row).wire(),
                "owner": {"id": row.owner_id, "name": name},
                "queueLength": queued,
                "lease": lease(row, now),
            }
            for row, name, queued in page
        ]
        return {"items": items, "nextCursor": encode_cursor(page[-1][0]) if len(rows) > limit else None}

    async def session(self, session_id: str) -> dict[str, Any]:
        """A live session's owner, lease and the seq its log ends at; ``NOT_FOUND`` when missing or deleted."""
        async with self.db.read() as s:
            row = await repo.get_session(s, session_id)
            if row is None:
                raise RpcError("NOT_FOUND", "Session not found")
            owner = await s.get(User, row.owner_id)
        return {
            "owner": {"id": row.owner_id, "name": owner.name if owner else None},
            "lease": lease(row, datetime.now(UTC)),
            "lastSeq": row.last_seq,
        }

    async def totals(self) -> dict[str, Any]:
        """Counts over the whole database (every replica's work)."""
        async with self.db.read() as s:
            return await repo.admin_stats(s)


def lease(row: ChatSession, now: datetime) -> dict[str, Any] | None:
    """Who runs the session and until when, and whether that lease is still live at ``now``."""
    if row.lease_owner is None:
        return None
    return {
        "owner": row.lease_owner,
        "runId": row.run_id,
        "expiresAt": repo.ms(row.lease_expires_at) if row.lease_expires_at is not None else None,
        "live": row.lease_expires_at is not None and row.lease_expires_at > now,
    }
