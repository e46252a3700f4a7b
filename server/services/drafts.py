"""Drafts: the composer's unsent text of a session (and its files not sent yet), kept per user and session, so a
draft typed on one device is offered on another.

**Versions, so nothing typed is overwritten unasked.** A draft has a ``version`` that grows by one with every
write. ``draft.save`` and ``draft.clear`` carry the version the device last saw (``baseVersion``); when the
draft has moved on since (another device wrote it), nothing is written and the reply carries the newer draft
(``saved: false``), for the device to offer rather than overwrite. So sending on one device clears the draft
everywhere that has not typed further, and a device that typed further keeps its text.

**Bounded.** The text is at most ``CHATSYNC_MAX_CONTENT_CHARS`` (what a message may hold), 32 files; a device
writes a session's draft at most once a second (``draft.save``; a clear is never refused, so a sent message's
draft cannot outlive it), counted over every replica on a Redis bus.

Every write is told to the session's ``presence.watch`` subscribers (``services.presence``) after it commits.
"""

from __future__ import annotations

import logging
import time
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ..domain import outputs
from ..domain.events import dumps
from ..protocol.errors import RpcError
from ..pubsub.base import Bus
from ..store import repo
from ..store.db import Database
from ..store.models import ApiToken, Draft, User, utcnow
from .presence import PresenceService

log = logging.getLogger(__name__)

WRITES_PER_SECOND = 1.0
MAX_DRAFT_FILES = 32
_THROTTLE_KEEP = 10_000  # writers remembered per process for the per-process limit (memory bus)


def _ms(value: Any) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


class DraftService:
    """A user's unsent composer text per session, versioned so that no write silently replaces another
    (module docstring)."""

    def __init__(self, db: Database, bus: Bus, presence: PresenceService, max_chars: int) -> None:
        self.db = db
        self.presence = presence
        self.max_chars = max_chars
        self.buckets = bus.rate_buckets()
        self._last_write: dict[tuple[str, str], float] = {}

    async def get(self, user: User, session_id: str) -> outputs.Draft:
        """The draft (an empty one at version 0 when there is none). Someone else's session is ``NOT_FOUND``."""
        async with self.db.read() as s:
            row = await repo.get_session(s, session_id)
            if row is None or row.owner_id != user.id:
                raise RpcError("NOT_FOUND", "Session not found")
            return await self._read(s, user.id, session_id)

    async def save(
        self,
        user: User,
        device_id: str | None,
        session_id: str,
        text: str,
        attachments: list[dict[str, Any]],
        base_version: int,
    ) -> outputs.DraftWrite:
        if len(text) > self.max_chars:
            raise RpcError("PAYLOAD_TOO_LARGE", f"A draft holds at most {self.max_chars} characters")
        await self._throttle(device_id or user.id, session_id)
        return await self._write(user, device_id, session_id, text, attachments, base_version)

    async def clear(self, user: User, device_id: str | None, session_id: str, base_version: int) -> outputs.DraftWrite:
        return await self._write(user, device_id, session_id, "", [], base_version)

    async def _throttle(self, writer: str, session_id: str) -> None:
        """At most one write a second per device and session: ``TOO_MANY_REQUESTS`` (nothing written) past it."""
        wait_ms = 0
        if self.buckets is not None:
            try:
                wait_ms = await self.buckets.take(f"draft:{writer}:{session_id}", 1, WRITES_PER_SECOND, 1)
            except Exception:  # Redis away: this process's own count stands in
                wait_ms = self._local_wait(writer, session_id)
        else:
            wait_ms = self._local_wait(writer, session_id)
        if wait_ms > 0:
            message = f"A draft is saved at most once a second; retry in {wait_ms} ms"
            raise RpcError("TOO_MANY_REQUESTS", message, retry_after_ms=wait_ms)

    def _local_wait(self, writer: str, session_id: str) -> int:
        now = time.monotonic()
        key = (writer, session_id)
        last = self._last_write.get(key)
        if last is not None and now - last < 1 / WRITES_PER_SECOND:
            return max(1, int((last + 1 / WRITES_PER_SECOND - now) * 1000))
        if len(self._last_write) >= _THROTTLE_KEEP:
            cutoff = now - 1 / WRITES_PER_SECOND
            self._last_write = {k: t for k, t in self._last_write.items() if t > cutoff}
        self._last_write[key] = now
        return 0

    async def _write(
        self,
        user: User,
        device_id: str | None,
        session_id: str,
        text: str,
        attachments: list[dict[str, Any]],
        base_version: int,
    ) -> outputs.DraftWrite:
        """Compare and set, under the session's row lock (so two devices' writes are taken in turn)."""
        async with self.db.write() as s:
            row = await repo.get_session(s, session_id, lock=True)
            if row is None or row.owner_id != user.id:
                raise RpcError("NOT_FOUND", "Session not found")
            draft = (
                await s.execute(select(Draft).where(Draft.user_id == user.id, Draft.session_id == session_id))
            ).scalar_one_or_none()
            current = draft.version if draft is not None else 0
            if base_version != current:
                return {"saved": False, "draft": await self._read(s, user.id, session_id)}
            if draft is None:
                draft = Draft(user_id=user.id, session_id=session_id, version=0)
                s.add(draft)
            draft.text = text
            draft.attachments = attachments
            draft.version = current + 1
            draft.device_id = device_id
            draft.updated_at = utcnow()
            await s.flush()
            wire = await self._read(s, user.id, session_id)
        await self.presence.publish(session_id, "draft", dumps(wire))
        return {"saved": True, "draft": wire}

    @staticmethod
    async def _read(s: AsyncSession, user_id: str, session_id: str) -> outputs.Draft:
        found = (
            await s.execute(
                select(Draft, ApiToken.name)
                .outerjoin(ApiToken, ApiToken.id == Draft.device_id)
                .where(Draft.user_id == user_id, Draft.session_id == session_id)
            )
        ).first()
        if found is None:
            return {
                "sessionId": session_id,
                "text": "",
                "attachments": [],
                "version": 0,
                "deviceId": None,
                "deviceName": None,
                "updatedAt": None,
            }
        draft, device_name = found
        return {
            "sessionId": session_id,
            "text": draft.text,
            "attachments": cast("list[outputs.FileInfo]", list(draft.attachments or [])),
            "version": int(draft.version),
            "deviceId": draft.device_id,
            "deviceName": device_name,
            "updatedAt": _ms(draft.updated_at),
        }
