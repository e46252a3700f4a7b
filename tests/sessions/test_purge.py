"""Deleted sessions are purged after the retention: no row of them is left in any table, nor a file only they
carried; live sessions keep everything; purges running together (as on several replicas) share the work."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from typing import Any

import httpx
from engine_helpers import FAST, Stream
from sqlalchemy import func, select

from server.services.purge import Purger
from server.store.models import (
    ChatSession,
    Event,
    FileRef,
    Message,
    QueuedMessage,
    Run,
    StoredFile,
    ToolCallRow,
    utcnow,
)

TABLES = {
    "messages": Message,
    "events": Event,
    "queued_messages": QueuedMessage,
    "runs": Run,
    "tool_calls": ToolCallRow,
}
TOOLS = [{"name": "ask_user", "executor": "client"}]


async def _rows(live: Any, session_ids: list[str]) -> dict[str, int]:
    """Rows of these sessions, per table."""
    counts = {}
    async with live.services.db.read() as s:
        for name, model in {**TABLES, "file_refs": FileRef}.items():
            stmt = select(func.count()).select_from(model).where(model.session_id.in_(session_ids))
            counts[name] = (await s.execute(stmt)).scalar_one()
        stmt = select(func.count()).select_from(ChatSession).where(ChatSession.id.in_(session_ids))
        counts["sessions"] = (await s.execute(stmt)).scalar_one()
    return counts


async def _files(live: Any, file_ids: list[str]) -> int:
    async with live.services.db.read() as s:
        stmt = select(func.count()).select_from(StoredFile).where(StoredFile.id.in_(file_ids))
        return (await s.execute(stmt)).scalar_one()


async def _upload(live: Any, name: str) -> str:
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        reply = await http.post(
            "/files",
            files={"file": (name, os.urandom(2000))},
            headers={"authorization": f"Bearer {live.tokens['alice']}"},
        )
    assert reply.status_code == 200, reply.text
    return reply.json()["id"]


async def _busy_session(c: Any, file_ids: list[str]) -> str:
    """A session with every kind of row: messages, events, a run waiting for a tool output, its tool call,
    queued messages, and references to the files."""
    sid = (await c.mutation("session.create", {"tools": TOOLS}))["id"]
    files = [{"fileId": f} for f in file_ids]
    stream = Stream(await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"}))
    await c.mutation("message.send", {"sessionId": sid, "content": "/tool ask_user {}", "attachments": files})
    await stream.until(lambda e: e["type"] == "session-updated" and e["session"]["status"] == "requires-action")
    for text in ("later", "and later"):
        await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": text, "attachments": files})
    await stream.sub.close()
    return sid


async def test_deleted_sessions_leave_no_rows_after_the_purge(db_url: str, server_factory: Any) -> None:
    live = await server_factory(db_url, deleted_session_retention_seconds=0, purge_sweep_seconds=0.05, **FAST)
    shared = await _upload(live, "shared.txt")
    async with live.client("alice") as c:
        kept = await _busy_session(c, [shared])
        kept_rows = await _rows(live, [kept])
        deleted, only_deleted = [], []
        for cycle in range(5):
            only_deleted.append(await _upload(live, f"only-{cycle}.txt"))
            sid = await _busy_session(c, [only_deleted[-1], shared])
            assert all(await _rows(live, [sid])), await _rows(live, [sid])
            await c.mutation("session.delete", {"sessionId": sid})
            deleted.append(sid)
        deadline = time.monotonic() + 30
        while any((await _rows(live, deleted)).values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await _rows(live, deleted) == dict.fromkeys([*TABLES, "file_refs", "sessions"], 0)
        assert await _files(live, only_deleted) == 0 and await _files(live, [shared]) == 1
        assert await _rows(live, [kept]) == kept_rows
        assert (await c.query("session.get", {"sessionId": kept}))["session"]["status"] == "requires-action"


async def test_a_deleted_session_is_kept_for_the_retention(db_url: str, server_factory: Any) -> None:
    live = await server_factory(db_url, **FAST)  # the default retention: a minute
    purger = Purger(live.services.db, live.services.files, live.settings)
    async with live.client("alice") as c:
        sid = await _busy_session(c, [await _upload(live, "a.txt")])
        await c.mutation("session.delete", {"sessionId": sid})
    before = await _rows(live, [sid])
    assert await purger.purge() == 0
    assert await _rows(live, [sid]) == before and before["sessions"] == 1
    assert await purger.purge(utcnow() + timedelta(seconds=61)) == 1
    assert not any((await _rows(live, [sid])).values())


async def test_purges_running_together_share_the_work(db_url: str, server_factory: Any) -> None:
    """Three purgers at once, as on three replicas: each session is purged exactly once, none fails."""
    live = await server_factory(db_url, **FAST)
    settings = live.settings.model_copy(update={"deleted_session_retention_seconds": 0})
    purgers = [Purger(live.services.db, live.services.files, settings) for _ in range(3)]
    async with live.client("alice") as c:
        sids = []
        for i in range(12):
            sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
            await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"m{i}"})
            await c.mutation("session.delete", {"sessionId": sid})
            sids.append(sid)
    assert sum(await asyncio.gather(*(p.purge() for p in purgers))) == len(sids)
    assert await asyncio.gather(*(p.purge_session(sids[0]) for p in purgers)) == [False] * 3
    assert not any((await _rows(live, sids)).values())
