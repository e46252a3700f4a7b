"""Files no message or queued message carries are collected after the grace period; deleting a session
removes the files only it carried."""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from file_helpers import download, stored_nothing, upload
from sqlalchemy import func, select
from testkit import fresh_pg_database

from server.store.models import FileBlob


async def _up(live: Any, name: str, data: bytes | None = None) -> str:
    reply = await upload(live, data if data is not None else os.urandom(1000), name)
    assert reply.status_code == 200, reply.text
    return reply.json()["id"]


async def _exists(live: Any, file_id: str) -> bool:
    return (await download(live, file_id)).status_code == 200


async def _blobs(live: Any) -> int:
    async with live.services.db.read() as s:
        return (await s.execute(select(func.count()).select_from(FileBlob))).scalar_one()


async def test_unreferenced_files_are_collected(db_url: str, server_factory: Any, files_url: str) -> None:
    live = await server_factory(db_url, files_url=files_url, file_grace_seconds=0)
    loose, queued, sent, both = [await _up(live, n) for n in ("loose", "queued", "sent", "both")]
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        item = await c.mutation(
            "message.enqueueMessage",
            {"sessionId": sid, "content": "q", "attachments": [{"fileId": queued}, {"fileId": both}]},
        )
        chat = (await c.mutation("session.create", {}))["id"]
        await c.mutation(
            "message.send", {"sessionId": chat, "content": "r", "attachments": [{"fileId": sent}, {"fileId": both}]}
        )

        await live.services.files.collect()
        assert not await _exists(live, loose)
        assert all([await _exists(live, f) for f in (queued, sent, both)])

        await c.mutation("message.removeQueuedMessage", {"sessionId": sid, "messageId": item["id"]})
        await live.services.files.collect()
        assert not await _exists(live, queued)
        assert await _exists(live, sent) and await _exists(live, both)  # the history still carries them
    assert await _blobs(live) == 2


async def test_the_grace_period_protects_new_files(db_url: str, server_factory: Any) -> None:
    live = await server_factory(db_url)  # the default grace period: a day
    f = await _up(live, "fresh")
    await live.services.files.collect()
    assert await _exists(live, f)


async def test_queue_edits_release_files(db_url: str, server_factory: Any, files_url: str) -> None:
    live = await server_factory(db_url, files_url=files_url, file_grace_seconds=0)
    a, b = await _up(live, "a"), await _up(live, "b")
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        item = await c.mutation(
            "message.enqueueMessage", {"sessionId": sid, "content": "q", "attachments": [{"fileId": a}]}
        )
        await c.mutation(
            "message.updateQueuedMessage", {"sessionId": sid, "messageId": item["id"], "attachments": [{"fileId": b}]}
        )
        await live.services.files.collect()
        assert not await _exists(live, a) and await _exists(live, b)
        await c.mutation("message.clearQueue", {"sessionId": sid})
        await live.services.files.collect()
        assert not await _exists(live, b)
    assert await stored_nothing(live)


async def test_deleting_a_session_removes_its_files(db_url: str, server_factory: Any, files_url: str) -> None:
    live = await server_factory(db_url, files_url=files_url)  # a day's grace: deletion does not wait for it
    data = os.urandom(5000)
    only, shared, same_bytes = await _up(live, "only"), await _up(live, "shared"), await _up(live, "copy", data)
    twin = await _up(live, "twin", data)  # the same content as same_bytes: one blob
    async with live.client("alice") as c:
        doomed = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        kept = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        await c.mutation(
            "message.enqueueMessage",
            {
                "sessionId": doomed,
                "content": "x",
                "attachments": [{"fileId": only}, {"fileId": shared}, {"fileId": same_bytes}],
            },
        )
        await c.mutation(
            "message.enqueueMessage",
            {"sessionId": kept, "content": "y", "attachments": [{"fileId": shared}, {"fileId": twin}]},
        )
        await c.mutation("session.delete", {"sessionId": doomed})
    assert not await _exists(live, only) and not await _exists(live, same_bytes)
    assert await _exists(live, shared)
    assert (await download(live, twin)).content == data  # its blob outlived the other name of it
    assert await _blobs(live) == 2


async def test_a_deleted_users_bytes_are_removed(db_url: str, server_factory: Any, files_url: str) -> None:
    live = await server_factory(db_url, files_url=files_url)
    kept = await _up(live, "alice's")
    for name in ("one", "two"):
        assert (await upload(live, os.urandom(600_000), name, user="bob")).status_code == 200
    storage = live.services.files.storage
    assert len([i async for i in storage.stored_ids()]) == 3
    await live.services.auth.delete_user("bob", live.services.files)  # rows go by cascade, bytes with them
    assert len([i async for i in storage.stored_ids()]) == 1
    assert await _exists(live, kept)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_directory_two_databases_share_keeps_both_their_files(
    server_factory: Any, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two databases whose servers keep files in the same directory: the default one (two SQLite files side by
    side, or PostgreSQL servers started in the same working directory). Neither collector takes the other's
    files, which its own database knows nothing of."""
    monkeypatch.delenv("CHATSYNC_FILES_URL")
    monkeypatch.chdir(tmp_path)
    async with AsyncExitStack() as databases:
        if kind == "sqlite":
            urls = [f"sqlite+aiosqlite:///{tmp_path / name}" for name in ("one.db", "two.db")]
        else:
            urls = [await databases.enter_async_context(fresh_pg_database()) for _ in range(2)]
        mine = await server_factory(urls[0], files_url=None)  # the default directory
        kept = await _up(mine, "kept", b"remember the milk")
        async with mine.client("alice") as c:
            sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
            await c.mutation(
                "message.enqueueMessage", {"sessionId": sid, "content": "q", "attachments": [{"fileId": kept}]}
            )
        theirs = await server_factory(urls[1], files_url=None)
        assert theirs.services.files.storage.root == mine.services.files.storage.root
        await theirs.services.files.sweep()
        await mine.services.files.sweep()
        got = await download(mine, kept)
        assert (got.status_code, got.content) == (200, b"remember the milk")
        await theirs.stop()  # before their databases are dropped
        await mine.stop()
