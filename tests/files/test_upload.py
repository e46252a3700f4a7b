"""POST /files and GET /files/{id}: round trips, media types from the bytes, owners only, limits."""
from __future__ import annotations

import hashlib
import os
from typing import Any

from conftest import download, stored_nothing, upload

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + os.urandom(64)


async def test_round_trip_with_digest(files_server: Any) -> None:
    data = os.urandom(700_000)  # several storage chunks
    reply = await upload(files_server, data, "photo.bin")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["name"] == "photo.bin" and body["size"] == len(data)
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    assert body["mediaType"] == "application/octet-stream"
    got = await download(files_server, body["id"])
    assert got.status_code == 200
    assert hashlib.sha256(got.content).hexdigest() == body["sha256"]
    assert got.headers["content-disposition"].startswith("attachment;")
    assert got.headers["x-content-type-options"] == "nosniff"
    info = await files_server.services.files.info(files_server.tokens and
                                                  (await _user_id(files_server, "alice")), body["id"])
    assert info.sha256 == body["sha256"]
    assert await files_server.services.files.read(info.user_id, body["id"]) == data


async def _user_id(live: Any, name: str) -> str:
    principal = await live.services.auth.identify(live.tokens[name])
    return principal.user.id
