"""Two ``chatsync serve`` replicas on one PostgreSQL database with the database storage backend: a file
uploaded through one is read and attached through the other, and a user's bounds hold over both at once."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from file_helpers import HeldUpload, refused_at_once
from servers import ServerProcess
from sqlalchemy import func, select

from chatsync_client import ChatClient
from server.services.auth import AuthService
from server.store import migrate
from server.store.db import Database
from server.store.models import FileBlob, StoredFile


@asynccontextmanager
async def _replicas(pg_url: str, tmp_path: Path, **settings: str) -> AsyncIterator[tuple[list[str], str]]:
    """Two replicas (their URLs) and alice's token; ``settings`` are more ``CHATSYNC_*`` variables."""
    async with Database(pg_url) as db:
        await migrate.upgrade(db)
        _user, token = await AuthService(db).create_user("alice")
    replicas = [
        ServerProcess(tmp_path, database_url=pg_url, name=f"replica-{i}", FILES_URL="database:", **settings)
        for i in range(2)
    ]
    try:
        for replica in replicas:
            replica.start()
        for replica in replicas:
            await replica.ready()
        yield [r.url for r in replicas], token
    finally:
        for replica in replicas:
            await replica.terminate()


async def test_replicas_share_files(pg_url: str, tmp_path: Path) -> None:
    async with _replicas(pg_url, tmp_path) as (urls, token):
        data = os.urandom(900_000)
        auth = {"authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=auth, timeout=60) as http:
            reply = await http.post(urls[0] + "/files", files={"file": ("scan.bin", data)})
            assert reply.status_code == 200
            file_id = reply.json()["id"]
            got = await http.get(f"{urls[1]}/files/{file_id}")
            assert got.status_code == 200 and hashlib.sha256(got.content).hexdigest() == reply.json()["sha256"]
        async with ChatClient(urls[1], token) as chat:
            session = await chat.create_session(queue_paused=True)
            queued = await chat.enqueue(session.id, "see the scan", [file_id])
            assert queued.attachments[0]["name"] == "scan.bin"


async def test_uploads_under_way_are_capped_over_both_replicas(pg_url: str, tmp_path: Path) -> None:
    async with _replicas(pg_url, tmp_path, MAX_UPLOADS_IN_FLIGHT_PER_USER="4") as (urls, token):
        held = await asyncio.gather(
            *(HeldUpload(urls[i % 2], token, os.urandom(200_000), f"{i}").start() for i in range(50))
        )
        under_way = await refused_at_once(held, admitted=4)
        assert [(await h.finish())[0] for h in under_way] == [200] * 4
        async with Database(pg_url) as db, db.read() as s:
            files = (await s.execute(select(func.count()).select_from(StoredFile))).scalar()
            blobs = (await s.execute(select(FileBlob.state))).scalars().all()
        assert files == 4 and blobs == ["complete"] * 4
