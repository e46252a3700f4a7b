"""A restart keeps the queue and the log; a client resuming with its lastEventId misses nothing."""

from __future__ import annotations

import asyncio
import os
import signal

from testkit import create_user, free_port, start_process, wait_ready

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
    port = free_port()
    env = {
        **os.environ,
        "CHATSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'r.db'}",
        "CHATSYNC_PORT": str(port),
        "CHATSYNC_LOG_LEVEL": "warning",
        "CHATSYNC_TEST_LOG": str(tmp_path / "server.log"),
    }
    token = create_user(env, "dana")
    url = f"http://127.0.0.1:{port}"
    proc = start_process(env)
    try:
        await wait_ready(url, proc)
        async with TrpcClient(url, token) as writer, TrpcClient(url, token) as reader:
            s = await writer.mutation("session.create", {"queuePaused": True})
            sub = await reader.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"})
            await writer.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "a"})
            assert (await sub.next())[0] == "1"
            proc.send_signal(signal.SIGTERM)
            # uvicorn re-raises the captured SIGTERM after its graceful shutdown
            assert proc.wait(20) in (0, -signal.SIGTERM)
            proc = start_process(env)
            await wait_ready(url, proc)
            await asyncio.wait_for(writer._connected.wait(), 20)
            await writer.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "b"})
            seq, ev = await sub.next(20)
            assert (seq, ev["message"]["content"]) == ("2", "b")
            assert reader.connects >= 2
            assert reader.reconnect_notices == 1 and writer.reconnect_notices == 1
    finally:
        proc.terminate()
        proc.wait(20)
