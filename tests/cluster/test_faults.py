"""Redis restarts mid-traffic; a client stops reading. Nobody loses an event."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from scenario_kit import open_clients, session_log
from testkit import PrivateRedis, PrivateRedisCluster, collect, free_port
from websockets.asyncio.client import connect

from server.pubsub.keys import DEFAULT_PREFIX, session_channel


@pytest.fixture(params=["redis", "redis-cluster"])
def restartable_bus(request, tmp_path):
    """A bus of the test's own, and a function that yields the Redis node serving a session (to kill it)."""
    if request.param == "redis":
        redis = PrivateRedis(free_port())
        redis.start()
        yield redis.url, lambda _sid: redis
        redis.kill()
    else:
        cluster = PrivateRedisCluster(str(tmp_path / "redis-cluster"))
        cluster.start()

        yield cluster.url, lambda sid: cluster.owner_of(session_channel(DEFAULT_PREFIX, sid))
        cluster.stop()


async def test_redis_restart_mid_traffic(cluster_factory, restartable_bus):
    bus_url, node_of = restartable_bus
    cluster = await cluster_factory(2, bus_url=bus_url, CHATSYNC_MAX_QUEUE_LENGTH="5000")
    clients = await open_clients(cluster, 6)
    try:
        s = await clients[0].mutation("session.create", {"queuePaused": True})
        redis = node_of(s["id"])
        subs = [await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"}) for c in clients]
        for sub in subs:
            await sub.wait_started()

        under_way = asyncio.Event()

        async def traffic(c, tag: str, n: int) -> None:
            for i in range(n):
                await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": f"{tag}{i}"})
                if i == 10:
                    under_way.set()
                await asyncio.sleep(0.005)  # a steady pace, so the traffic goes on while Redis is down

        before = asyncio.gather(*(traffic(c, f"a{j}-", 40) for j, c in enumerate(clients[:2])))
        await under_way.wait()
        redis.kill()  # mid-traffic: publishes fail, listeners lose their connection
        await before
        await asyncio.gather(*(traffic(c, f"b{j}-", 20) for j, c in enumerate(clients[:2])))
        redis.start()
        await asyncio.gather(*(traffic(c, f"c{j}-", 20) for j, c in enumerate(clients[:2])))
        log, snap = await session_log(cluster.urls[0], cluster.tokens["alice"], s["id"])
        last = int(snap["lastEventId"])
        assert last == 2 * (40 + 20 + 20)
        for sub in subs:
            assert await collect(sub, last, timeout=60) == log
    finally:
        await asyncio.gather(*(c.close() for c in clients))


async def test_slow_consumer_is_closed_and_resumes_with_everything(server_factory, sqlite_url):
    live = await server_factory(
        sqlite_url, send_buffer_bytes=64 * 1024, max_content_chars=100_000, max_queue_length=1000
    )
    async with live.client() as writer, live.client() as fast:
        s = await writer.mutation("session.create", {"queuePaused": True})
        sid = s["id"]
        fast_sub = await fast.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        await fast_sub.wait_started()
        # The slow client: subscribes, then never reads again.
        ws_url = live.url.replace("http", "ws") + "/trpc?connectionParams=1"
        slow = await connect(ws_url, max_queue=1, max_size=None)
        await slow.send(orjson.dumps({"method": "connectionParams", "data": {"token": live.tokens["alice"]}}).decode())
        await slow.send(
            orjson.dumps(
                {
                    "id": 1,
                    "method": "subscription",
                    "params": {"path": "session.events", "input": {"sessionId": sid, "lastEventId": "0"}},
                }
            ).decode()
        )
        assert orjson.loads(await slow.recv())["result"]["type"] == "started"
        slow.transport.pause_reading()  # stop reading at the socket: the server's buffer fills

        big = "x" * 60_000
        for i in range(200):
            await writer.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"{i}:{big}"})
        got = await collect(fast_sub, 200, timeout=30)  # the others are not held back
        assert [int(i) for i, _ in got] == list(range(1, 201))

        slow.transport.resume_reading()
        last_seen = 0
        with pytest.raises(Exception):
            while True:
                msg = orjson.loads(await asyncio.wait_for(slow.recv(), 10))
                if msg.get("result", {}).get("id"):
                    last_seen = int(msg["result"]["id"])
        assert slow.close_code == 4000
        await slow.close()
        assert last_seen < 200
        # Resume from the last id it saw: it gets everything after, nothing twice.
        async with live.client() as again:
            sub = await again.subscribe("session.events", {"sessionId": sid, "lastEventId": str(last_seen)})
            rest = await collect(sub, 200, timeout=30)
            assert [int(i) for i, _ in rest] == list(range(last_seen + 1, 201))
