"""One user on several devices, each on another replica (PostgreSQL + Redis): a retried write applies once,
the session feed follows every change, and a revoked token is closed everywhere."""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest
import websockets
from scenario_kit import connect_ws, exchange_link, lose_the_reply, sse_lines, subscribe_ws

from chatsync_client import TrpcClient, TrpcError


async def test_first_call_on_a_retry_on_b_enqueues_once(cluster_factory):
    cluster = await cluster_factory(2)
    a, b = cluster.urls
    crid = str(uuid.uuid4())
    async with TrpcClient(b, cluster.tokens["alice"]) as on_b:
        sid = (await on_b.mutation("session.create", {"queuePaused": True}))["id"]
        inp = {"sessionId": sid, "content": "once", "clientRequestId": crid}

        async def committed() -> bool:
            return bool(await on_b.query("message.getQueuedMessages", {"sessionId": sid}))

        await lose_the_reply(a, cluster.tokens["alice"], "message.enqueueMessage", inp, committed)
        retry = await on_b.mutation("message.enqueueMessage", inp)
        queue = await on_b.query("message.getQueuedMessages", {"sessionId": sid})
        assert [q["id"] for q in queue] == [retry["id"]]
        snap = await on_b.query("session.get", {"sessionId": sid})
        assert snap["lastEventId"] == "1"  # one event: the first call's queue-message-added


async def test_the_feed_follows_changes_made_on_the_other_replica(cluster_factory):
    cluster = await cluster_factory(2)
    a, b = cluster.urls
    async with (
        TrpcClient(a, cluster.tokens["alice"]) as laptop,
        TrpcClient(b, cluster.tokens["alice"]) as phone,
        TrpcClient(b, cluster.tokens["bob"]) as bob,
    ):
        listed = await phone.query("session.list", {})
        sub = await phone.subscribe("session.feed", {"lastEventId": listed["feedEventId"]})
        bob_sub = await bob.subscribe("session.feed", {})
        await bob_sub.wait_started()  # "from now" is fixed when it starts: bob's changes come after
        s = await laptop.mutation("session.create", {"title": "one"})
        await laptop.mutation("session.setTitle", {"sessionId": s["id"], "title": "two"})
        await laptop.mutation("message.send", {"sessionId": s["id"], "content": "hello"})
        seen = []
        while not (
            seen
            and seen[-1][1]["type"] == "session-updated"
            and seen[-1][1]["session"]["status"] == "idle"
            and len(seen) > 3
        ):
            seen.append(await sub.next(15))
        await phone.drop_connection()  # resume on the same replica after a killed socket
        await laptop.mutation("session.delete", {"sessionId": s["id"]})
        seen.append(await sub.next(15))
        ids = [int(i) for i, _e in seen]
        assert ids == list(range(1, len(ids) + 1))
        kinds = [e["type"] for _i, e in seen]
        assert kinds[0] == "session-created" and kinds[-1] == "session-deleted"
        assert [e["session"]["title"] for _i, e in seen[:2]] == ["one", "two"]
        assert "running" in [e["session"]["status"] for _i, e in seen[2:-1]]
        with pytest.raises(asyncio.TimeoutError):
            await bob_sub.next(0.5)  # nothing of alice's
        await sub.close()
        await bob_sub.close()


async def test_revocation_closes_ws_and_sse_on_both_replicas(cluster_factory):
    cluster = await cluster_factory(2)
    a, b = cluster.urls
    async with TrpcClient(a, cluster.tokens["alice"]) as admin_device:
        sid = (await admin_device.mutation("session.create", {}))["id"]
        link = await admin_device.mutation("auth.createLink", {"deviceName": "phone"})
        token = (await exchange_link(b, link["code"])).json()["token"]
        async with connect_ws(a, token) as ws:
            await subscribe_ws(ws, sid)
            lines: list[str] = []
            opened = asyncio.Event()
            stream = asyncio.create_task(sse_lines(b, token, sid, lines, opened))
            await asyncio.wait_for(opened.wait(), 10)
            async with TrpcClient(b, cluster.tokens["alice"]) as third:
                phone = next(d for d in await third.query("auth.devices") if d["name"] == "phone")
                await third.mutation("auth.revokeDevice", {"deviceId": phone["id"]})
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 1.0)
            assert closed.value.rcvd.code == 4503
            await asyncio.wait_for(stream, 1.0)
            error = orjson.loads(next(x for x in reversed(lines) if x.startswith("data: {"))[6:])
            assert error["data"]["code"] == "UNAUTHORIZED"
        with pytest.raises(TrpcError) as err:
            async with TrpcClient(a, token, reconnect=False) as again:
                await again.query("session.list", {})
        assert err.value.code == "UNAUTHORIZED"
        assert (await admin_device.query("session.get", {"sessionId": sid}))["session"]["id"] == sid
