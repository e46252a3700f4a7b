"""Files no message or queued message carries are collected after the grace period; deleting a session
removes the files only it carried."""

from __future__ import annotations

import os
from typing import Any

from file_helpers import download, stored_nothing, upload
from sqlalchemy import func, select

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


async def test_unreferenced_files_are_collected(server_factory: Any, db_url: str, files_url: str) -> None:
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


async def test_the_grace_period_protects_new_files(server_factory: Any, db_url: str) -> None:
    live = await server_factory(db_url)  # the default grace period: a day
    f = await _up(live, "fresh")
    await live.services.files.collect()
    assert await _exists(live, f)


async def test_queue_edits_release_files(server_factory: Any, db_url: str, files_url: str) -> None:
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


async def test_deleting_a_session_removes_its_files(server_factory: Any, db_url: str, files_url: str) -> None:
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


async def test_a_deleted_users_bytes_are_removed(server_factory: Any, db_url: str, files_url: str) -> None:
    live = await server_factory(db_url, files_url=files_url)
    kept = await _up(live, "alice's")
    for name in ("one", "two"):
        assert (await upload(live, os.urandom(600_000), name, user="bob")).status_code == 200
    await live.services.auth.delete_user("bob")  # rows go by cascade; storage is not the database's to clean
    storage = live.services.files.storage
    assert len([i async for i in storage.stored_ids()]) == 3
    assert await live.services.files.collect_stray_bytes() == 2
    assert len([i async for i in storage.stored_ids()]) == 1
    assert await _exists(live, kept)
