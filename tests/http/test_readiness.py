"""``/readyz`` reports the database, the bus and the schema's revision against the shipped migrations, and
fails (503) while any of them is down or behind and while the process drains; ``/healthz`` stays 200
throughout, since it only says the process answers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import httpx
from alembic.script import ScriptDirectory
from sqlalchemy import text
from testkit import PG_ADMIN_DSN, PrivateRedis, fresh_pg_database

from server.store import migrate

HEAD = sorted(ScriptDirectory(str(migrate.MIGRATIONS_DIR)).get_heads())


async def probe(url: str, path: str = "/readyz") -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient() as http:
        res = await http.get(url + path)
    return res.status_code, res.json()


async def wait_for_status(url: str, status: int, timeout: float = 20) -> dict[str, Any]:
    """``/readyz``'s report once it answers ``status``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        code, report = await probe(url)
        if code == status:
            return report
        assert asyncio.get_running_loop().time() < deadline, f"/readyz stayed {code}: {report}"
        await asyncio.sleep(0.05)


async def set_revision(live: Any, revision: str) -> None:
    async with live.services.db.write() as s:
        await s.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})


async def test_ready_reports_the_database_the_bus_and_the_schema(db_url, server_factory, redis_url):
    live = await server_factory(db_url, bus_url=redis_url)
    code, report = await probe(live.url)
    assert code == 200, report
    assert report["status"] == "ready" and report["draining"] is False
    assert report["database"] == {"up": True} and report["bus"] == {"up": True}
    assert report["migrations"] == {"state": "head", "current": HEAD, "head": HEAD}

    # An older schema (an upgrade still to run) is not ready; one newer than this code (a replica of the next
    # version migrated it during a rolling update) is, since migrations add before they remove.
    await set_revision(live, "0001")
    code, report = await probe(live.url)
    assert code == 503 and report["status"] == "unavailable"
    assert report["migrations"] == {"state": "behind", "current": ["0001"], "head": HEAD}
    await set_revision(live, "ffffffffffff")
    code, report = await probe(live.url)
    assert code == 200 and report["migrations"]["state"] == "ahead"
    await set_revision(live, HEAD[0])
    assert (await probe(live.url))[0] == 200


async def test_ready_on_a_redis_cluster(server_factory, sqlite_url, redis_cluster_url):
    live = await server_factory(sqlite_url, bus_url=redis_cluster_url)
    code, report = await probe(live.url)
    assert code == 200 and report["bus"] == {"up": True}, report


async def test_not_ready_while_redis_is_down(server_factory, sqlite_url):
    redis = PrivateRedis()
    redis.start()
    try:
        live = await server_factory(sqlite_url, bus_url=redis.url)
        assert (await probe(live.url))[0] == 200
        redis.kill()
        report = await wait_for_status(live.url, 503)
        assert report["status"] == "unavailable"
        assert report["bus"]["up"] is False and report["bus"]["error"]
        assert report["database"] == {"up": True} and report["migrations"]["state"] == "head"
        assert await probe(live.url, "/healthz") == (200, {"status": "ok"})
        redis.start()
        report = await wait_for_status(live.url, 200)
        assert report["bus"] == {"up": True}
    finally:
        redis.kill()


async def test_not_ready_when_the_database_is_gone(server_factory):
    async with fresh_pg_database() as url:
        live = await server_factory(url)
        assert (await probe(live.url))[0] == 200
        name = url.rsplit("/", 1)[1]
        admin = await asyncpg.connect(PG_ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        finally:
            await admin.close()
        code, report = await probe(live.url)
        assert code == 503 and report["status"] == "unavailable"
        assert report["database"]["up"] is False and report["database"]["error"]
        assert report["migrations"] == {"state": "unknown"}
        assert await probe(live.url, "/healthz") == (200, {"status": "ok"})


class SlowToDrain:
    """Stands for a client connection that takes its time to drain at shutdown (a slow reader): the drain
    lasts until the test releases it."""

    def __init__(self) -> None:
        self.draining = asyncio.Event()
        self.release = asyncio.Event()

    async def shutdown(self, timeout: float) -> None:
        self.draining.set()
        await self.release.wait()


async def http_get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str) -> tuple[int, Any]:
    """One request on an open keep-alive connection (a client connected before the shutdown began)."""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    head = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in head[1:] if line)
    body = await reader.readexactly(int(headers["content-length"]))
    return int(head[0].split()[1]), json.loads(body)


async def test_not_ready_while_draining(server_factory, sqlite_url):
    live = await server_factory(sqlite_url)
    port = int(live.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    slow = SlowToDrain()
    try:
        assert (await http_get(reader, writer, "/readyz"))[0] == 200
        live.services.connections.add(slow)
        live.server.should_exit = True
        await asyncio.wait_for(slow.draining.wait(), 10)
        code, report = await http_get(reader, writer, "/readyz")
        assert code == 503 and report["status"] == "draining" and report["draining"] is True
        assert report["database"] == {"up": True} and report["bus"] == {"up": True}
        assert (await http_get(reader, writer, "/healthz")) == (200, {"status": "ok"})
        slow.release.set()
        await asyncio.wait_for(live.task, 20)
    finally:
        slow.release.set()
        writer.close()
