"""Calls the files tests share: upload and download over HTTP, and what storage holds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

import httpx


async def upload(
    live: Any, data: bytes, name: str = "notes.txt", user: str = "alice", content_type: str = "application/octet-stream"
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        return await http.post(
            "/files",
            files={"file": (name, data, content_type)},
            headers={"authorization": f"Bearer {live.tokens[user]}"},
        )


async def download(live: Any, file_id: str, user: str = "alice") -> httpx.Response:
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        return await http.get(f"/files/{file_id}", headers={"authorization": f"Bearer {live.tokens[user]}"})


async def stored_nothing(live: Any) -> bool:
    """No file, no blob, and no bytes in storage."""
    from sqlalchemy import func, select

    from server.store.models import FileBlob, StoredFile

    services = live.services
    async with services.db.read() as s:
        files = (await s.execute(select(func.count()).select_from(StoredFile))).scalar_one()
        blobs = (await s.execute(select(func.count()).select_from(FileBlob))).scalar_one()
    return files == 0 and blobs == 0 and await services.files.storage.is_empty()


async def user_id(live: Any, name: str) -> str:
    principal = await live.services.auth.identify(live.tokens[name])
    return principal.user.id


class HeldUpload:
    """``POST /files`` over a raw socket that sends its headers (with ``Content-Length``) and the start of the
    body at once and the rest only on :meth:`finish`: an upload under way for as long as the test likes. The
    server's answer is read as soon as it comes (:attr:`answer`), also while the body is still unsent."""

    def __init__(self, url: str, token: str, data: bytes, name: str = "held.bin") -> None:
        self.url = url
        self.token = token
        boundary = "heldupload"
        head = f'--{boundary}\r\ncontent-disposition: form-data; name="file"; filename="{name}"\r\n\r\n'.encode()
        self.body = head + data + f"\r\n--{boundary}--\r\n".encode()
        self.sent = len(head) + len(data) // 2
        self.boundary = boundary
        self.answer: asyncio.Task[tuple[int, dict[str, str], Any]] | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def start(self) -> HeldUpload:
        parts = urlsplit(self.url)
        reader, self._writer = await asyncio.open_connection(parts.hostname, parts.port)
        self._writer.write(
            (
                f"POST /files HTTP/1.1\r\nhost: {parts.netloc}\r\nauthorization: Bearer {self.token}\r\n"
                f"content-type: multipart/form-data; boundary={self.boundary}\r\n"
                f"content-length: {len(self.body)}\r\n\r\n"
            ).encode()
            + self.body[: self.sent]
        )
        await self._writer.drain()
        self.answer = asyncio.create_task(_read_answer(reader))
        return self

    async def finish(self) -> tuple[int, dict[str, str], Any]:
        """Send the rest of the body and return the answer: (status, headers, JSON body)."""
        assert self._writer is not None and self.answer is not None
        with suppress(ConnectionError):
            self._writer.write(self.body[self.sent :])
            await self._writer.drain()
        try:
            return await asyncio.wait_for(self.answer, 60)
        finally:
            self._writer.close()

    def close(self) -> None:
        assert self._writer is not None
        self._writer.close()

    def abort(self) -> None:
        """Cut the connection with the body half sent, as a client that went away does."""
        assert self._writer is not None
        self._writer.transport.abort()
        if self.answer is not None:
            self.answer.cancel()


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], Any]:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = body.decode("utf-8", "replace")
    return int(status_line.split()[1]), headers, parsed


async def until(condition: Callable[[], Awaitable[bool]], timeout: float = 30) -> None:
    """Wait for an observable condition of the server's state."""
    async with asyncio.timeout(timeout):
        while not await condition():
            await asyncio.sleep(0.02)


async def refused_at_once(held: list[HeldUpload], admitted: int) -> list[HeldUpload]:
    """Wait until every upload but ``admitted`` of them has its answer; those must all be 429. Returns the
    uploads still under way."""

    async def answered() -> bool:
        return sum(h.answer is not None and h.answer.done() for h in held) >= len(held) - admitted

    await until(answered)
    for h in held:
        assert h.answer is not None
        if h.answer.done():
            status, headers, body = h.answer.result()
            assert status == 429 and body["error"]["code"] == "TOO_MANY_REQUESTS", body
            assert "CHATSYNC_MAX_UPLOADS_IN_FLIGHT_PER_USER" in body["error"]["message"]
            assert int(headers["retry-after"]) >= 1
            h.close()
    under_way = [h for h in held if h.answer is not None and not h.answer.done()]
    assert len(under_way) == admitted
    return under_way
