"""Several clients on one session over real sockets: same ordered events, same queue, nothing lost."""

from __future__ import annotations

import asyncio
import random

import pytest
from testkit import collect, make_changes, replay_queue


async def test_three_clients_converge(live):
    clients = [live.client() for _ in range(3)]
    for c in clients:
        await c.connect()
    try:
        s = await clients[0].mutation("session.create", {"queuePaused": True, "title": "shared"})
        subs = [await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"}) for c in clients]
        for sub in subs:
            await sub.wait_started()
        await asyncio.gather(*(make_changes(c, s["id"], random.Random(i), 25) for i, c in enumerate(clients)))
        snap = await clients[0].query("session.get", {"sessionId": s["id"]})
        last = int(snap["lastEventId"])
        streams = [await collect(sub, last) for sub in subs]
        ids = [[int(i) for i, _e in stream] for stream in streams]
        assert ids[0] == list(range(1, last + 1))
        assert ids[0] == ids[1] == ids[2]
        assert streams[0] == streams[1] == streams[2]
        server_queue = await clients[1].query("message.getQueuedMessages", {"sessionId": s["id"]})
        for stream in streams:
            assert replay_queue(stream) == server_queue
        assert snap["queue"] == server_queue
    finally:
        for c in clients:
            await c.close()


async def test_resume_after_drop_gets_exactly_the_missed_events(live):
    async with live.client() as writer, live.client() as reader:
        s = await writer.mutation("session.create", {"queuePaused": True})
        sid = s["id"]
        sub = await reader.subscribe("session.events", {"sessionId": sid})
        await sub.wait_started()
        for i in range(5):
            await writer.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"a{i}"})
        first = await collect(sub, 5)
        await reader.drop_connection()
        for i in range(7):  # written while the reader is away
            await writer.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"b{i}"})
        rest = await collect(sub, 12)
        assert reader.connects >= 2
        assert [int(i) for i, _ in first + rest] == list(range(1, 13))
        assert [e["message"]["content"] for _i, e in rest] == [f"b{i}" for i in range(7)]


async def test_subscribe_from_last_event_id_replays_then_goes_live(live):
    async with live.client() as c:
        s = await c.mutation("session.create", {"queuePaused": True})
        for i in range(4):
            await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": f"x{i}"})
        sub = await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "2"})
        await c.mutation("message.clearQueue", {"sessionId": s["id"]})
        got = await collect(sub, 5)
        assert [(int(i), e["type"]) for i, e in got] == [
            (3, "queue-message-added"),
            (4, "queue-message-added"),
            (5, "queue-cleared"),
        ]


async def test_replay_spanning_several_log_pages_arrives_whole_and_in_order(live):
    from server.sync.delivery import CATCH_UP_PAGE

    total = CATCH_UP_PAGE * 2 + 37
    async with live.client() as c:
        s = await c.mutation("session.create", {"queuePaused": True})
        for i in range(total):
            if i and i % 90 == 0:
                await c.mutation("message.clearQueue", {"sessionId": s["id"]})
            await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": f"p{i}"})
        last = int((await c.query("session.get", {"sessionId": s["id"]}))["lastEventId"])
        sub = await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"})
        got = await collect(sub, last)
        assert [int(i) for i, _e in got] == list(range(1, last + 1))
        contents = [e["message"]["content"] for _i, e in got if e["type"] == "queue-message-added"]
        assert contents == [f"p{i}" for i in range(total)]


async def test_without_last_event_id_starts_live(live):
    async with live.client() as c:
        s = await c.mutation("session.create", {"queuePaused": True})
        await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "old"})
        sub = await c.subscribe("session.events", {"sessionId": s["id"]})
        await sub.wait_started()
        await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "new"})
        seq, ev = await sub.next()
        assert (seq, ev["message"]["content"]) == ("2", "new")


async def test_trimmed_position_gets_resync_required(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, event_retention=10)
    async with live.client() as c:
        s = await c.mutation("session.create", {"queuePaused": True})
        for i in range(80):
            await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": f"m{i}"})
        sub = await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "1"})
        seq, ev = await sub.next()
        assert seq is None and ev == {"type": "resync-required", "sessionId": s["id"], "lastEventId": "1"}
        with pytest.raises(StopAsyncIteration):
            await sub.next()
        # The documented recovery: take the snapshot's lastEventId and subscribe from there.
        snap = await c.query("session.get", {"sessionId": s["id"]})
        sub2 = await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": snap["lastEventId"]})
        await sub2.wait_started()
        await c.mutation("message.clearQueue", {"sessionId": s["id"]})
        seq, ev = await sub2.next()
        assert int(seq) == int(snap["lastEventId"]) + 1 and ev["type"] == "queue-cleared"


async def test_future_last_event_id_gets_resync_required(live):
    async with live.client() as c:
        s = await c.mutation("session.create", {"queuePaused": True})
        sub = await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "999"})
        _seq, ev = await sub.next()
        assert ev["type"] == "resync-required"


async def test_session_deleted_ends_subscriptions(live):
    async with live.client() as c, live.client() as watcher:
        s = await c.mutation("session.create", {"queuePaused": True})
        sub = await watcher.subscribe("session.events", {"sessionId": s["id"]})
        await sub.wait_started()
        await c.mutation("session.delete", {"sessionId": s["id"]})
        _seq, ev = await sub.next()
        assert ev["type"] == "session-deleted"
        with pytest.raises(StopAsyncIteration):
            await sub.next()
