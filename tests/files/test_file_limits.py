"""Limits answer 413 before anything past them is stored; an upload cut off midway leaves nothing behind."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from file_helpers import stored_nothing, until, upload

from chatsync_client import TrpcError


async def test_file_too_large_is_refused_and_nothing_is_stored(
    db_url: str, server_factory: Any, files_url: str
) -> None:
    live = await server_factory(db_url, files_url=files_url, max_file_bytes=100_000)
    declared = await upload(live, os.urandom(150_000), "big.bin")  # Content-Length says so up front
    assert declared.status_code == 413
    assert declared.json()["error"] == {
        "code": "PAYLOAD_TOO_LARGE",
        "message": "the file exceeds 100000 bytes (CHATSYNC_MAX_FILE_BYTES)",
    }

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: found out while streaming
        yield b"--b\r\ncontent-disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n\r\n"
        for _ in range(15):
            yield os.urandom(10_000)
        yield b"\r\n--b--\r\n"

    async with httpx.AsyncClient(base_url=live.url) as http:
        streamed = await http.post(
            "/files",
            content=chunks(),
            headers={
                "authorization": f"Bearer {live.tokens['alice']}",
                "content-type": "multipart/form-data; boundary=b",
            },
        )
    assert streamed.status_code == 413 and "CHATSYNC_MAX_FILE_BYTES" in streamed.json()["error"]["message"]
    assert await stored_nothing(live)
    assert (await upload(live, os.urandom(100_000), "fits.bin")).status_code == 200


async def test_user_quota_and_file_count(db_url: str, server_factory: Any, files_url: str) -> None:
    live = await server_factory(
        db_url, files_url=files_url, max_file_bytes=200_000, max_user_file_bytes=250_000, max_files_per_user=3
    )
    assert (await upload(live, os.urandom(150_000), "one.bin")).status_code == 200
    over = await upload(live, os.urandom(150_000), "two.bin")
    assert over.status_code == 413 and "CHATSYNC_MAX_USER_FILE_BYTES" in over.json()["error"]["message"]
    assert (await upload(live, os.urandom(150_000), "bobs.bin", user="bob")).status_code == 200
    assert (await upload(live, b"a", "a")).status_code == 200
    assert (await upload(live, b"b", "b")).status_code == 200
    fourth = await upload(live, b"c", "c")
    assert fourth.status_code == 413 and "CHATSYNC_MAX_FILES_PER_USER" in fourth.json()["error"]["message"]
    assert (await live.services.files.usage(await _alice(live))).files == 3


async def _alice(live: Any) -> str:
    return (await live.services.auth.identify(live.tokens["alice"])).user.id


async def test_files_of_one_message_are_bounded(db_url: str, server_factory: Any) -> None:
    live = await server_factory(db_url, max_message_file_bytes=100)
    a = (await upload(live, b"a" * 60, "a.txt")).json()
    b = (await upload(live, b"b" * 60, "b.txt")).json()
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        for path in ("message.send", "message.enqueueMessage"):
            with pytest.raises(TrpcError) as err:
                await c.mutation(
                    path, {"sessionId": sid, "content": "x", "attachments": [{"fileId": a["id"]}, {"fileId": b["id"]}]}
                )
            assert err.value.code == "PAYLOAD_TOO_LARGE" and "CHATSYNC_MAX_MESSAGE_FILE_BYTES" in err.value.message
        snapshot = await c.query("session.get", {"sessionId": sid})
        assert snapshot["queue"] == [] and not [m for m in snapshot["messages"] if m["role"] == "user"]


async def test_cut_off_upload_leaves_nothing(files_server: Any) -> None:
    """A raw socket sends half a body, then closes: the server drops what it stored of it."""
    head = b"--cut\r\ncontent-disposition: form-data; name=\"file\"; filename=\"half.bin\"\r\n\r\n"
    total = len(head) + 3_000_000
    host, port = urlsplit(files_server.url).hostname, urlsplit(files_server.url).port
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"POST /files HTTP/1.1\r\nhost: x\r\n"
        b"authorization: Bearer " + files_server.tokens["alice"].encode() + b"\r\n"
        b"content-type: multipart/form-data; boundary=cut\r\n"
        b"content-length: " + str(total).encode() + b"\r\n\r\n" + head
    )
    writer.write(os.urandom(1_500_000))  # past the first writes of either backend
    await writer.drain()
    storage = files_server.services.files.storage

    async def partly_stored() -> bool:
        return not await storage.is_empty()

    await until(partly_stored)  # the upload is under way: bytes are in storage
    writer.transport.abort()
    await until(lambda: stored_nothing(files_server))
    reader.feed_eof()


async def test_uploads_count_against_the_rate_limit(server_factory: Any, sqlite_url: str) -> None:
    live = await server_factory(sqlite_url, rate_limit_per_second=0.001, rate_limit_burst=2)
    assert (await upload(live, b"1", "a")).status_code == 200
    assert (await upload(live, b"2", "b")).status_code == 200
    third = await upload(live, b"3", "c")
    assert third.status_code == 429 and third.json()["error"]["code"] == "TOO_MANY_REQUESTS"
    assert int(third.headers["retry-after"]) > 0
    assert (await upload(live, b"4", "d", user="bob")).status_code == 200  # per user
