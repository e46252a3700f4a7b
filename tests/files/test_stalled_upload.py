"""An upload whose body stops arriving is ended by CHATSYNC_HTTP_BODY_TIMEOUT_SECONDS (408) and leaves nothing
behind — no file row, no bytes — on each database with each storage backend."""

from __future__ import annotations

from typing import Any

import pytest
from file_helpers import stored_nothing
from rawhttp import raw, read_until_closed, request, until
from sqlalchemy import func, select

from server.store.models import FileBlob

BOUNDARY = "b0undary"


@pytest.fixture
async def server(db_url: str, server_factory: Any, files_url: str) -> Any:
    return await server_factory(db_url, files_url=files_url, http_body_timeout_seconds=1.0)


async def uploads_begun(live: Any) -> int:
    async with live.services.db.read() as s:
        return int((await s.execute(select(func.count()).select_from(FileBlob))).scalar_one())


async def test_a_stalled_upload_is_closed_and_discarded(server: Any) -> None:
    head = request(
        "/files",
        server.tokens["alice"],
        "POST",
        f"content-type: multipart/form-data; boundary={BOUNDARY}\r\ncontent-length: {1 << 20}\r\n",
    )
    part = f'--{BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="big.bin"\r\n\r\n'.encode()
    async with raw(server.url) as (reader, writer):
        writer.write(head + part + b"\x01" * (300 * 1024))  # a third of the file, then nothing
        await until(lambda: uploads_begun(server))
        assert (await read_until_closed(reader)).startswith(b"HTTP/1.1 408 ")
    await until(lambda: stored_nothing(server))
