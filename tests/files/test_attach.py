"""Uploaded files on messages and queued messages: resolved, owned, shown, and carried into the history."""

from __future__ import annotations

from typing import Any

import pytest
from file_helpers import download, upload
from sqlalchemy import select

from chatsync_client import TrpcError
from server.store.models import StoredFile

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(200))


async def _file(live: Any, data: bytes = PNG, name: str = "shot.png", user: str = "alice") -> dict[str, Any]:
    reply = await upload(live, data, name, user=user)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _shown(f: dict[str, Any]) -> dict[str, Any]:
    return {"fileId": f["id"], "name": f["name"], "mediaType": f["mediaType"], "size": f["size"]}


async def test_send_carries_the_file(files_server: Any) -> None:
    f = await _file(files_server)
    assert f["mediaType"] == "image/png"
    async with files_server.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        sent = await c.mutation(
            "message.send",
            {"sessionId": sid, "content": "look", "attachments": [{"fileId": f["id"]}, {"path": "/tmp/a.txt"}]},
        )
        assert sent["message"]["attachments"] == [_shown(f), {"path": "/tmp/a.txt"}]
        snapshot = await c.query("session.get", {"sessionId": sid})
        first = next(m for m in snapshot["messages"] if m["role"] == "user")
        assert first["attachments"] == [_shown(f), {"path": "/tmp/a.txt"}]


async def test_another_users_file_is_not_found(files_server: Any) -> None:
    theirs = await _file(files_server, user="bob")
    mine = await _file(files_server, b"mine", "mine.txt")
    async with files_server.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        for path, extra in (("message.send", {}), ("message.enqueueMessage", {})):
            with pytest.raises(TrpcError) as err:
                await c.mutation(
                    path, {"sessionId": sid, "content": "x", "attachments": [{"fileId": theirs["id"]}], **extra}
                )
            assert err.value.code == "NOT_FOUND"
        queued = await c.mutation(
            "message.enqueueMessage", {"sessionId": sid, "content": "q", "attachments": [{"fileId": mine["id"]}]}
        )
        with pytest.raises(TrpcError) as err:
            await c.mutation(
                "message.updateQueuedMessage",
                {"sessionId": sid, "messageId": queued["id"], "attachments": [{"fileId": theirs["id"]}]},
            )
        assert err.value.code == "NOT_FOUND"
        snapshot = await c.query("session.get", {"sessionId": sid})
        assert [q["attachments"] for q in snapshot["queue"]] == [[_shown(mine)]]
        assert not [m for m in snapshot["messages"] if m["role"] == "user"]
    reply = await download(files_server, theirs["id"], user="alice")
    assert reply.status_code == 404 and reply.json()["error"]["code"] == "NOT_FOUND"


async def test_queued_attachments_go_with_the_auto_sent_message(files_server: Any) -> None:
    f = await _file(files_server)
    g = await _file(files_server, b"second file", "b.txt")
    async with files_server.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        events = await c.subscribe("session.events", {"sessionId": sid})
        await events.wait_started()
        queued = await c.mutation(
            "message.enqueueMessage", {"sessionId": sid, "content": "later", "attachments": [{"fileId": f["id"]}]}
        )
        assert queued["attachments"] == [_shown(f)]
        updated = await c.mutation(
            "message.updateQueuedMessage",
            {"sessionId": sid, "messageId": queued["id"], "attachments": [{"fileId": f["id"]}, {"fileId": g["id"]}]},
        )
        assert updated["attachments"] == [_shown(f), _shown(g)]
        seen: dict[str, Any] = {}
        while "queue-message-updated" not in seen:
            _id, event = await events.next()
            seen[event["type"]] = event
        assert seen["queue-message-added"]["message"]["attachments"] == [_shown(f)]
        assert seen["queue-message-updated"]["message"]["attachments"] == [_shown(f), _shown(g)]
        await c.mutation("message.resumeQueue", {"sessionId": sid})
        while True:  # the queue sends it by itself; its message carries the files
            _id, event = await events.next()
            if event["type"] == "message-created" and event["message"]["role"] == "user":
                assert event["message"]["attachments"] == [_shown(f), _shown(g)]
                break
        while True:  # the model got the bytes (the echo model names what it received)
            _id, event = await events.next()
            if event["type"] == "message-completed" and event["message"]["role"] == "assistant":
                answer = event["message"]["content"]
                break
        assert f"[received shot.png: image/png, {len(PNG)} bytes]" in answer
        assert "[received b.txt: text/plain, 11 bytes]" in answer
        snapshot = await c.query("session.get", {"sessionId": sid})
        assert snapshot["queue"] == []
        sent = next(m for m in snapshot["messages"] if m["role"] == "user")
        assert sent["content"] == "later" and sent["attachments"] == [_shown(f), _shown(g)]
        await events.close()


async def test_a_file_that_cannot_be_read_fails_the_step_and_keeps_the_message(
    server_factory, sqlite_url, tmp_path
) -> None:
    """Storage failing for another reason than the file being gone: the answer is not made without the file;
    the run fails with the retryable ``attachment_unavailable``, and the user's message and file stay."""
    live = await server_factory(sqlite_url, files_url=str(tmp_path / "blobs"), echo_delay=0.001)
    f = await _file(live)
    async with live.services.db.read() as s:
        blob_id = (await s.execute(select(StoredFile.blob_id).where(StoredFile.id == f["id"]))).scalar_one()
    path = live.services.files.storage.path(blob_id)
    path.unlink()
    path.mkdir()  # reading it now fails with IsADirectoryError
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        sent = await c.mutation(
            "message.send", {"sessionId": sid, "content": "look", "attachments": [{"fileId": f["id"]}]}
        )
        while True:
            _id, event = await sub.next(30)
            if event["type"] in ("run-failed", "run-finished"):
                break
        await sub.close()
        assert event["type"] == "run-failed"
        assert event["error"]["code"] == "attachment_unavailable" and event["error"]["retryable"] is True
        snapshot = await c.query("session.get", {"sessionId": sid})
        user = [m for m in snapshot["messages"] if m["role"] == "user"]
        assert [(m["id"], m["attachments"]) for m in user] == [(sent["message"]["id"], [_shown(f)])]
