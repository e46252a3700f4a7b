"""Two ``chatsync serve`` replicas on one PostgreSQL database with the database storage backend: a file
uploaded through one is read and attached through the other."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx
from testkit import free_port, start_process, wait_ready

from server.client import ChatClient
from server.services.auth import AuthService
from server.store import migrate
from server.store.db import Database


async def test_replicas_share_files(pg_url: str, tmp_path: Path) -> None:
    async with Database(pg_url) as db:
        await migrate.upgrade(db)
        _user, token = await AuthService(db).create_user("alice")
    procs, urls = [], []
    try:
        for i in range(2):
            port = free_port()
            env = {
                **os.environ,
                "CHATSYNC_DATABASE_URL": pg_url,
                "CHATSYNC_PORT": str(port),
                "CHATSYNC_FILES_URL": "database:",
                "CHATSYNC_BUS_URL": "memory://",
                "CHATSYNC_LOG_LEVEL": "warning",
                "CHATSYNC_TEST_LOG": str(tmp_path / f"replica-{i}.log"),
            }
            procs.append(start_process(env))
            urls.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(urls, procs):
            await wait_ready(url, proc)
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
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(20)
