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

from server.client import TrpcClient


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
