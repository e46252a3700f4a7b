"""A 100 MB upload and its download through a real ``chatsync serve`` process, whose resident memory must
grow by less than 20 MB: the body streams to storage and back, it is never held whole."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from servers import ServerProcess
from testkit import process_memory

SIZE = 100 * 1024 * 1024
CHUNK = 1024 * 1024
BOUNDARY = "memtest"


async def _body(digest: hashlib._Hash) -> AsyncIterator[bytes]:
    yield (
        f"--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
        "content-type: application/octet-stream\r\n\r\n"
    ).encode()
    block = os.urandom(CHUNK)
    for i in range(SIZE // CHUNK):
        data = bytes([i % 256]) + block[1:]  # distinct chunks, cheaply
        digest.update(data)
        yield data
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


async def test_100_mb_upload_keeps_memory_flat(tmp_path: Path, db_url: str, files_url: str) -> None:
    database_url = None if db_url.startswith("sqlite") else db_url
    with ServerProcess(
        tmp_path, database_url=database_url, users=("alice",), MAX_FILE_BYTES=str(SIZE), FILES_URL=files_url
    ) as served:
        auth = {"authorization": f"Bearer {served.tokens['alice']}"}
        async with httpx.AsyncClient(base_url=served.url, headers=auth, timeout=120) as http:
            warm = await http.post("/files", files={"file": ("warm.txt", b"warm up")})  # first-use imports
            assert warm.status_code == 200
            assert (await http.get(f"/files/{warm.json()['id']}")).status_code == 200
            before = process_memory(served.proc.pid)
            sent = hashlib.sha256()
            reply = await http.post(
                "/files", content=_body(sent), headers={"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
            )
            assert reply.status_code == 200, reply.text
            assert reply.json()["size"] == SIZE and reply.json()["sha256"] == sent.hexdigest()
            received, size = hashlib.sha256(), 0
            async with http.stream("GET", f"/files/{reply.json()['id']}") as got:
                assert got.status_code == 200
                async for chunk in got.aiter_raw():
                    received.update(chunk)
                    size += len(chunk)
            assert size == SIZE and received.hexdigest() == sent.hexdigest()
            after = process_memory(served.proc.pid)
    growth = after["VmHWM"] - before["VmRSS"]
    print(
        f"RSS before {before['VmRSS'] / 2**20:.1f} MiB, peak after {after['VmHWM'] / 2**20:.1f} MiB, "
        f"growth {growth / 2**20:.1f} MiB"
    )
    assert growth < 20 * 1024 * 1024, (before, after)
