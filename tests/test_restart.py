"""A restart keeps the queue and the log; a client resuming with its lastEventId misses nothing."""

from __future__ import annotations

import asyncio
import signal

from servers import ServerProcess

from chatsync_client import TrpcClient


async def test_restart_in_process(db_url, server_factory):
    first = await server_factory(db_url)
    async with first.client() as c:
        s = await c.mutation("session.create", {"queuePaused": True, "title": "durable"})
        sid = s["id"]
        sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        for i in range(3):
            await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"before {i}"})
        seen = [await sub.next() for _ in range(3)]
    await first.stop()

    second = await server_factory(db_url, users=(), tokens=first.tokens)
    async with second.client() as c:
        queue = await c.query("message.getQueuedMessages", {"sessionId": sid})
        assert [q["content"] for q in queue] == [f"before {i}" for i in range(3)]
        await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "after"})
        sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": seen[1][0]})
        replay = [await sub.next() for _ in range(2)]
        assert [int(i) for i, _ in replay] == [3, 4]
        assert replay[0] == seen[2]
        assert replay[1][1]["message"]["content"] == "after"


async def test_client_rides_through_a_real_process_restart(tmp_path):
    """SIGTERM a real `chatsync serve`: clients get tRPC's reconnect notice, come back, and resume."""
    server = ServerProcess(tmp_path, database_url=f"sqlite+aiosqlite:///{tmp_path / 'r.db'}", users=("dana",))
    token = server.tokens["dana"]
    url = server.url
    server.start()
    try:
        await server.ready()
        async with TrpcClient(url, token) as writer, TrpcClient(url, token) as reader:
            s = await writer.mutation("session.create", {"queuePaused": True})
            sub = await reader.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"})
            await writer.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "a"})
            assert (await sub.next())[0] == "1"
            # uvicorn re-raises the captured SIGTERM after its graceful shutdown
            assert server.stop(20) in (0, -signal.SIGTERM)
            server.start()
            await server.ready()
            await asyncio.wait_for(writer._connected.wait(), 20)
            await writer.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "b"})
            seq, ev = await sub.next(20)
            assert (seq, ev["message"]["content"]) == ("2", "b")
            assert reader.connects >= 2
            assert reader.reconnect_notices == 1 and writer.reconnect_notices == 1
    finally:
        server.stop()
