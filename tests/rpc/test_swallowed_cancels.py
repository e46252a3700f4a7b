"""A closed connection or a stopped subscription leaves no task behind, even when a call its task awaited
swallowed the cancellation (Python 3.11's ``asyncio.wait_for``, used inside libraries, returns normally when
the cancel lands just as its work completes). Here the calls swallow it every time, as such a call does when it
loses that race."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from websockets.asyncio.client import connect

from server.domain import close_codes


async def swallows_cancel(entered: asyncio.Event, result: Any) -> Any:
    """Wait (for ever) until cancelled, then return ``result`` as if the work had completed."""
    entered.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        pass
    return result


def frame(rid: int, method: str, path: str | None = None) -> str:
    msg: dict[str, Any] = {"id": rid, "method": method}
    if path is not None:
        msg["params"] = {"path": path}
    return orjson.dumps(msg).decode()


async def until(condition: Any, what: str, timeout: float = 15) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.02)


def watchers(live: Any) -> int:
    return sum(len(w) for w in live.services.devices._watchers.values())


async def watch_devices(server_factory: Any, sqlite_url: str, monkeypatch: Any) -> tuple[Any, asyncio.Event, Any]:
    """A server whose device watch's read of the pending links swallows the cancellation; returns it, the event
    set once a watch reads them, and a connection of alice's (to enter) that starts such a watch as id 1."""
    live = await server_factory(sqlite_url, users=("alice",))
    entered = asyncio.Event()
    monkeypatch.setattr(live.services.links, "pending", lambda *_a: swallows_cancel(entered, []))
    url = live.url.replace("http", "ws") + "/trpc"
    return live, entered, connect(url, additional_headers={"Authorization": f"Bearer {live.tokens['alice']}"})


async def test_a_stopped_subscription_whose_read_swallowed_the_stop_ends(server_factory, sqlite_url, monkeypatch):
    live, entered, connection = await watch_devices(server_factory, sqlite_url, monkeypatch)
    async with connection as ws:
        await ws.send(frame(1, "subscription", "auth.watchDevices"))
        assert orjson.loads(await asyncio.wait_for(ws.recv(), 5))["result"]["type"] == "started"
        await asyncio.wait_for(entered.wait(), 5)
        await ws.send(frame(1, "subscription.stop"))
        while True:  # the device list the swallowed read let through may come first
            reply = orjson.loads(await asyncio.wait_for(ws.recv(), 15))
            if reply.get("result", {}).get("type") == "stopped":
                break
        await until(lambda: watchers(live) == 0, "the stopped subscription still watches the devices")


async def test_a_closed_connection_whose_subscription_swallowed_the_close_ends(server_factory, sqlite_url, monkeypatch):
    live, entered, connection = await watch_devices(server_factory, sqlite_url, monkeypatch)
    async with connection as ws:
        await ws.send(frame(1, "subscription", "auth.watchDevices"))
        await asyncio.wait_for(entered.wait(), 5)
        (conn,) = live.services.connections
    await until(lambda: conn._done, "the connection's cleanup waits for its subscription for ever")
    assert watchers(live) == 0 and not conn.subscriptions


async def test_a_close_request_that_a_call_swallowed_still_closes(server_factory, sqlite_url, monkeypatch):
    """The server closes a connection (here: it shuts down) while the connection's read loop waits for the
    identity check of its connectionParams, and that call swallows the cancellation: the connection closes."""
    live = await server_factory(sqlite_url, users=("alice",))
    entered = asyncio.Event()
    check_token = live.services.auth.check_token

    async def slow_check(token: str) -> Any:
        principal = await check_token(token)
        return await swallows_cancel(entered, principal)

    monkeypatch.setattr(live.services.auth, "check_token", slow_check)
    url = live.url.replace("http", "ws") + "/trpc?connectionParams=1"
    async with connect(url) as ws:
        await ws.send(orjson.dumps({"method": "connectionParams", "data": {"token": live.tokens["alice"]}}).decode())
        await asyncio.wait_for(entered.wait(), 5)
        (conn,) = live.services.connections
        await conn.shutdown(0.1)
        await until(lambda: conn._done, "the connection stays open")
        while ws.close_code is None:
            await asyncio.wait_for(ws.recv(), 15)  # the reconnect notice, then the close
    assert ws.close_code == close_codes.SERVER_RESTART
