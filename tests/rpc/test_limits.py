"""Bounds per connection and per user: subscriptions per socket, the sign-in deadline of a new socket,
sessions per user, the mutation rate limit, and an SSE stream that is not read."""

from __future__ import annotations

import asyncio
import socket
import urllib.parse

import httpx
import orjson
import pytest
import websockets
from websockets.asyncio.client import connect

from chatsync_client import TrpcError


def frame(rid, method, path, inp=None) -> str:
    params = {"path": path, **({"input": inp} if inp is not None else {})}
    return orjson.dumps({"id": rid, "method": method, "params": params}).decode()


async def test_subscriptions_per_connection(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",), max_subscriptions_per_connection=3)
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
    ws_url = live.url.replace("http", "ws") + "/trpc"
    async with connect(ws_url, additional_headers={"Authorization": f"Bearer {live.tokens['alice']}"}) as ws:
        for rid in range(1, 5):
            await ws.send(frame(rid, "subscription", "session.events", {"sessionId": sid}))
        replies = [orjson.loads(await asyncio.wait_for(ws.recv(), 5)) for _ in range(4)]
        started = sorted(r["id"] for r in replies if r.get("result", {}).get("type") == "started")
        refused = [r for r in replies if "error" in r]
        assert started == [1, 2, 3] and refused[0]["id"] == 4
        assert refused[0]["error"]["data"]["code"] == "TOO_MANY_REQUESTS"
        await ws.send(orjson.dumps({"id": 2, "method": "subscription.stop"}).decode())
        assert orjson.loads(await asyncio.wait_for(ws.recv(), 5))["result"]["type"] == "stopped"
        await ws.send(frame(5, "subscription", "session.events", {"sessionId": sid}))  # room again
        assert orjson.loads(await asyncio.wait_for(ws.recv(), 5))["result"]["type"] == "started"


async def test_a_socket_that_never_signs_in_is_closed(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",), auth_timeout_seconds=0.5)
    ws_url = live.url.replace("http", "ws") + "/trpc"
    signed_in = await connect(ws_url, additional_headers={"Authorization": f"Bearer {live.tokens['alice']}"})
    # Signed in by connectionParams: its deadline is gone from the moment it signed in, not slept out.
    by_params = await connect(ws_url + "?connectionParams=1")
    await by_params.send(orjson.dumps({"method": "connectionParams", "data": {"token": live.tokens["alice"]}}).decode())
    await by_params.send("PING")
    assert await asyncio.wait_for(by_params.recv(), 5) == "PONG"  # frames are read in order: it signed in
    assert len(live.services.connections) == 2
    assert all(conn.ctx.user is not None and conn._auth_timer is None for conn in live.services.connections)
    for url in (ws_url + "?connectionParams=1", ws_url):  # params never sent; no token at all
        async with connect(url) as ws:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd.code == 4504
    for ws in (signed_in, by_params):  # signed in: past the deadline (the closes above), never timed out
        await ws.send("PING")
        assert await asyncio.wait_for(ws.recv(), 5) == "PONG"
        await ws.close()


async def test_sessions_per_user(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice", "bob"), max_sessions_per_user=2)
    async with live.client("alice") as c:
        first = await c.mutation("session.create", {})
        await c.mutation("session.create", {})
        with pytest.raises(TrpcError) as err:
            await c.mutation("session.create", {})
        assert err.value.code == "PRECONDITION_FAILED"
        assert len((await c.query("session.list", {}))["items"]) == 2
        await c.mutation("session.delete", {"sessionId": first["id"]})
        await c.mutation("session.create", {})  # deleting makes room
    async with live.client("bob") as bob:
        await bob.mutation("session.create", {})


async def test_rate_limit_per_user(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice", "bob"), rate_limit_per_second=0.5, rate_limit_burst=3)
    async with live.client("alice") as c, live.client("bob") as bob:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "1"})
        await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "2"})
        with pytest.raises(TrpcError) as err:
            await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "3"})
        assert err.value.code == "TOO_MANY_REQUESTS" and err.value.http_status == 429
        assert err.value.retry_after_ms is not None and 0 < err.value.retry_after_ms <= 2000
        assert len(await c.query("message.getQueuedMessages", {"sessionId": sid})) == 2  # queries are not limited
        bsid = (await bob.mutation("session.create", {"queuePaused": True}))["id"]  # another user: unaffected
        await bob.mutation("message.enqueueMessage", {"sessionId": bsid, "content": "b"})


async def test_an_sse_stream_that_is_not_read_is_ended_not_buffered(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",), send_buffer_bytes=64 * 1024)
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        port = int(live.url.rsplit(":", 1)[1])
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        inp = urllib.parse.quote(orjson.dumps({"sessionId": sid}).decode())
        sock.sendall(
            (
                f"GET /trpc/session.events?input={inp} HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {live.tokens['alice']}\r\nAccept: text/event-stream\r\n\r\n"
            ).encode()
        )
        await asyncio.sleep(0)
        for i in range(120):  # ~12 MB of events towards a client that reads nothing (more than the kernel buffers)
            await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"{i:03d}" + "x" * 99_000})
            if i % 10 == 9:
                await c.mutation("message.clearQueue", {"sessionId": sid})
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        received = b""
        while True:
            try:
                chunk = await asyncio.wait_for(loop.sock_recv(sock, 65536), 10)
            except TimeoutError:
                raise AssertionError(received[:300] + b" ... " + received[-600:]) from None
            if not chunk or b"serialized-error" in received[-4096:] + chunk:
                received += chunk
                break
            received += chunk
        sock.close()
        text = received.decode(errors="replace")
        assert "Slow consumer" in text and "event: serialized-error" in text
        ids = [int(line[4:]) for line in text.split("\n") if line.startswith("id: ") and line[4:].strip().isdigit()]
        assert ids == list(range(1, len(ids) + 1)) and len(ids) < 132  # a prefix in order, then the end


async def test_an_exhausted_pool_answers_retryable_not_internal(pg_url, server_factory):
    """Every PostgreSQL connection taken (by a stand-in for long transactions): another user's call fails fast
    with SERVICE_UNAVAILABLE, and works again once connections are free."""
    live = await server_factory(pg_url, users=("alice",), db_pool_timeout_seconds=0.5)
    db = live.services.db
    held = []
    for _ in range(30):  # pool_size 10 + max_overflow 20
        cm = db.write_engine.connect()
        held.append((cm, await cm.__aenter__()))
    try:
        async with httpx.AsyncClient(base_url=live.url) as http:  # checking the token needs the database too
            r = await http.get("/trpc/session.list", headers={"authorization": f"Bearer {live.tokens['alice']}"})
            assert r.status_code == 503 and r.json()["error"]["data"]["code"] == "SERVICE_UNAVAILABLE"
            r = await http.get("/admin/api/stats", headers={"authorization": f"Bearer {live.tokens['alice']}"})
            assert r.status_code == 503 and r.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
        ws_url = live.url.replace("http", "ws") + "/trpc?connectionParams=1"
        async with connect(ws_url) as ws:
            await ws.send(
                orjson.dumps({"method": "connectionParams", "data": {"token": live.tokens["alice"]}}).decode()
            )
            reply = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            assert reply["id"] is None and reply["error"]["data"]["code"] == "SERVICE_UNAVAILABLE"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd.code == 4002  # reconnect shortly
    finally:
        for cm, _conn in held:
            await cm.__aexit__(None, None, None)
    async with live.client("alice") as c:
        assert (await c.query("session.list", {}))["items"] == []


async def test_another_user_is_answered_while_one_sends_the_largest_requests(server_factory, sqlite_url):
    """The largest requests the default limits allow (a 50-call batch of ~19 KB enqueues in one frame, 64
    instructions of ~15 KB) from one user, while another user pings and enqueues: everyone is answered.
    (How fast is measured by bench/fairness.py, not asserted here.)"""
    live = await server_factory(sqlite_url, users=("heavy", "light"))
    async with live.client("heavy") as h, live.client("light") as lc:
        hsid = (await h.mutation("session.create", {"queuePaused": True}))["id"]
        lsid = (await lc.mutation("session.create", {"queuePaused": True}))["id"]
        ws = await connect(
            live.url.replace("http", "ws") + "/trpc",
            additional_headers={"Authorization": f"Bearer {live.tokens['light']}"},
        )

        async def flood() -> None:
            for _ in range(3):
                batch = await asyncio.gather(
                    *(
                        h.mutation("message.enqueueMessage", {"sessionId": hsid, "content": "x" * 19_000})
                        for _ in range(50)
                    )
                )
                assert len(batch) == 50
                await h.mutation("message.clearQueue", {"sessionId": hsid})
                done = await h.mutation(
                    "message.addInstructions",
                    {"sessionId": hsid, "respond": False, "instructions": ["y" * 15_000] * 64},
                )
                assert len(done["messages"]) == 64

        async def meanwhile() -> int:
            answered = 0
            while not flooding.done() and answered < 90:  # the queue holds 100
                await ws.send("PING")
                assert await asyncio.wait_for(ws.recv(), 10) == "PONG"
                await lc.mutation("message.enqueueMessage", {"sessionId": lsid, "content": f"l{answered}"})
                answered += 1
            return answered

        flooding = asyncio.create_task(flood())
        answered = await meanwhile()
        await flooding
        await ws.close()
        assert answered >= 1
        assert len(await lc.query("message.getQueuedMessages", {"sessionId": lsid})) == answered
