"""Steps the scenario suites share, ``tests/cluster`` (several replicas) and ``tests/multidevice`` (one user on
several devices): clients spread over replicas, a session's whole log, a write whose reply is lost, a device
signed in with a link, and a device's own WebSocket and SSE subscriptions (imported as ``scenario_kit``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson
import pytest
from testkit import HoldingProxy, collect
from websockets.asyncio.client import connect

from chatsync_client import TrpcClient


async def open_clients(cluster: Any, n: int, *, failover: bool = False) -> list[TrpcClient]:
    """``n`` connected clients of alice's, spread round-robin over the cluster's replicas (with ``failover``,
    each knows the other replicas to reconnect to)."""
    clients = []
    for i in range(n):
        urls = cluster.urls[i % len(cluster.urls) :] + cluster.urls[: i % len(cluster.urls)]
        c = TrpcClient(urls if failover else urls[0], cluster.tokens["alice"], max_backoff=0.5)
        await c.connect()
        clients.append(c)
    return clients


async def session_log(url: str, token: str, sid: str) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """The session's event log as a fresh subscriber from 0 receives it (read from the database), and the
    ``session.get`` snapshot whose ``lastEventId`` it was read up to."""
    async with TrpcClient(url, token) as c:
        snap = await c.query("session.get", {"sessionId": sid})
        last = int(snap["lastEventId"])
        if not last:
            return [], snap
        sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        return await collect(sub, last), snap


async def lose_the_reply(
    url: str, token: str, path: str, inp: dict[str, Any], committed: Callable[[], Awaitable[bool]]
) -> None:
    """Call mutation ``path`` on the server at ``url`` through a proxy that passes the request and holds the
    reply back; once ``committed()`` says the server applied it, cut the connection. The caller never gets the
    reply: it cannot tell whether the write happened."""
    proxy = await HoldingProxy(int(url.rsplit(":", 1)[1])).start()
    try:
        flaky = TrpcClient(proxy.url, token, reconnect=False)
        await flaky.connect()
        proxy.hold = True
        call = asyncio.create_task(flaky.mutation(path, inp))
        deadline = asyncio.get_running_loop().time() + 10
        while not await committed():
            assert asyncio.get_running_loop().time() < deadline, f"{path} did not commit"
            await asyncio.sleep(0.02)
        proxy.cut()
        with pytest.raises(Exception):
            await asyncio.wait_for(call, 10)  # the reply was lost with the socket
        await flaky.close()
    finally:
        await proxy.close()


async def exchange_link(url: str, code: str, device: str = "phone") -> httpx.Response:
    """``POST /auth/link``: a new device signs in with the one-time code of a device link."""
    async with httpx.AsyncClient() as http:
        return await http.post(url + "/auth/link", json={"code": code, "deviceName": device})


async def link_info(url: str, code: str) -> httpx.Response:
    """``POST /auth/link/info``: whose account a sign-in code is for, without spending it."""
    async with httpx.AsyncClient() as http:
        return await http.post(url + "/auth/link/info", json={"code": code})


def connect_ws(url: str, token: str) -> Any:
    """A raw tRPC WebSocket to the server at ``url``, signed in with ``token`` (``async with``)."""
    return connect(url.replace("http", "ws") + "/trpc", additional_headers={"Authorization": f"Bearer {token}"})


async def subscribe_ws(ws: Any, sid: str) -> None:
    """Subscribe a raw tRPC WebSocket to ``session.events`` of ``sid`` and wait until it started."""
    params = {"path": "session.events", "input": {"sessionId": sid}}
    await ws.send(orjson.dumps({"id": 1, "method": "subscription", "params": params}).decode())
    assert orjson.loads(await ws.recv())["result"]["type"] == "started"


async def sse_lines(url: str, token: str, sid: str, out: list[str], opened: asyncio.Event) -> None:
    """Read ``session.events`` of ``sid`` as an SSE stream into ``out``, line by line; ``opened`` is set once
    the subscription started."""
    params = {"input": orjson.dumps({"sessionId": sid}).decode()}
    async with httpx.AsyncClient(timeout=None) as http:
        async with http.stream(
            "GET", url + "/trpc/session.events", params=params, headers={"authorization": f"Bearer {token}"}
        ) as r:
            async for line in r.aiter_lines():
                out.append(line)
                if line.startswith("data: {}"):
                    opened.set()


async def attach_while_deleting(
    urls: list[str], token: str, database_url: str, rounds: int
) -> tuple[list[str], list[str]]:
    """``rounds`` times: a file that session A's queue carries is enqueued into session B through the last of
    ``urls`` while A is deleted through the first. Returns the files whose enqueue was acknowledged, and every
    way a round went wrong: an error other than ``NOT_FOUND``, or an acknowledged enqueue whose file is gone or
    not referenced by B (the collector would take it)."""
    from sqlalchemy import func, select

    from chatsync_client import TrpcError
    from server.store.db import Database
    from server.store.models import FileRef, StoredFile

    wrong: list[str] = []
    acknowledged: list[str] = []
    auth = {"authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=auth, timeout=60) as http,
        TrpcClient(urls[0], token) as deleter,
        TrpcClient(urls[-1], token) as attacher,
        Database(database_url) as db,
    ):
        for i in range(rounds):
            up = await http.post(urls[i % len(urls)] + "/files", files={"file": (f"f{i}.txt", f"round {i}".encode())})
            assert up.status_code == 200, up.text
            fid = up.json()["id"]
            a = (await deleter.mutation("session.create", {"queuePaused": True}))["id"]
            b = (await attacher.mutation("session.create", {"queuePaused": True}))["id"]
            await deleter.mutation(
                "message.enqueueMessage", {"sessionId": a, "content": "a", "attachments": [{"fileId": fid}]}
            )
            deleted, enqueued = await asyncio.gather(
                deleter.mutation("session.delete", {"sessionId": a}),
                attacher.mutation(
                    "message.enqueueMessage", {"sessionId": b, "content": "b", "attachments": [{"fileId": fid}]}
                ),
                return_exceptions=True,
            )
            if isinstance(deleted, BaseException):
                wrong.append(f"round {i}: delete failed: {deleted!r}")
            if isinstance(enqueued, TrpcError):
                if enqueued.code != "NOT_FOUND":
                    wrong.append(f"round {i}: enqueue answered {enqueued.code}: {enqueued.message}")
                queue = await attacher.query("message.getQueuedMessages", {"sessionId": b})
                if queue:
                    wrong.append(f"round {i}: a refused enqueue left {queue}")
                continue
            if isinstance(enqueued, BaseException):
                raise enqueued
            acknowledged.append(fid)
            async with db.read() as s:
                kept = (await s.execute(select(func.count()).where(StoredFile.id == fid))).scalar_one()
                refs = (
                    await s.execute(select(func.count()).where(FileRef.file_id == fid, FileRef.session_id == b))
                ).scalar_one()
            got = await http.get(f"{urls[-1]}/files/{fid}")
            if not kept or not refs or got.status_code != 200 or got.content != f"round {i}".encode():
                wrong.append(f"round {i}: acknowledged; file rows {kept}, refs {refs}, GET {got.status_code}")
    return acknowledged, wrong
