"""Several replicas behave as one server: every client, on whichever replica, gets every durable event
once and in order — with concurrent writers on both replicas, random disconnects, and replica restarts."""

from __future__ import annotations

import asyncio
import random

from scenario_kit import open_clients, session_log
from testkit import collect, make_changes, replay_queue

from chatsync_client import TrpcClient


async def test_two_replicas_twenty_clients_fifty_changes_each(cluster_factory):
    cluster = await cluster_factory(2, CHATSYNC_MAX_QUEUE_LENGTH="2000")
    clients = await open_clients(cluster, 20)
    try:
        s = await clients[0].mutation("session.create", {"queuePaused": True})
        subs = [await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"}) for c in clients]
        for sub in subs:
            await sub.wait_started()
        done = await asyncio.gather(*(make_changes(c, s["id"], random.Random(i), 50) for i, c in enumerate(clients)))
        log, snap = await session_log(cluster.urls[0], cluster.tokens["alice"], s["id"])
        last = int(snap["lastEventId"])
        # Each change that took effect wrote one event, except a move to where the item already was.
        assert 0.8 * sum(done) <= last <= sum(done) and last > 500
        assert [int(i) for i, _ in log] == list(range(1, last + 1))
        for sub in subs:
            assert await collect(sub, last, timeout=60) == log
        assert replay_queue(log) == snap["queue"]
    finally:
        await asyncio.gather(*(c.close() for c in clients))


async def test_chaos_disconnects_across_replicas(cluster_factory):
    """1,000 random socket drops across ten subscribers, which fail over between two replicas, while two
    writers (one per replica) keep changing the queue."""
    cluster = await cluster_factory(2, CHATSYNC_MAX_QUEUE_LENGTH="5000")
    watchers = await open_clients(cluster, 10, failover=True)
    writers = await open_clients(cluster, 2)
    rng = random.Random(7)
    try:
        s = await writers[0].mutation("session.create", {"queuePaused": True})
        subs = [await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"}) for c in watchers]
        stop = asyncio.Event()

        written = [0, 0]

        async def write(c: TrpcClient, i: int) -> None:
            while not stop.is_set():
                await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": f"w{i}-{written[i]}"})
                written[i] += 1

        async def chaos() -> None:
            # At least 1,000 drops, and at least 150 changes written while they happen (on a loaded machine the
            # drops alone can be over before the writers got far).
            drops = 0
            while drops < 1000 or sum(written) < 150:
                victim = rng.choice(watchers)
                if victim.connected:
                    await victim.drop_connection()
                    drops += 1
                await asyncio.sleep(rng.uniform(0, 0.01))
            stop.set()

        await asyncio.gather(chaos(), *(write(c, i) for i, c in enumerate(writers)))
        log, snap = await session_log(cluster.urls[0], cluster.tokens["alice"], s["id"])
        last = int(snap["lastEventId"])
        assert last == sum(written)  # one event per enqueue, and nothing else
        for sub in subs:
            assert await collect(sub, last, timeout=60) == log  # every event once, in order
        assert sum(c.connects for c in watchers) >= 1000
        # Reconnects rotate through the replica list, so every watcher was served by both replicas.
        assert all(c.connects >= 2 for c in watchers)
    finally:
        await asyncio.gather(*(c.close() for c in watchers + writers))


async def test_graceful_restart_moves_clients_to_the_other_replica(cluster_factory):
    cluster = await cluster_factory(2)
    clients = await open_clients(cluster, 6, failover=True)
    try:
        s = await clients[0].mutation("session.create", {"queuePaused": True})
        subs = [await c.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"}) for c in clients]
        for i in range(5):
            await clients[i % 6].mutation("message.enqueueMessage", {"sessionId": s["id"], "content": f"a{i}"})
        await cluster.replicas[0].terminate()
        on_first = [c for c in clients if c.reconnect_notices]
        for i in range(5):
            await clients[1].mutation("message.enqueueMessage", {"sessionId": s["id"], "content": f"b{i}"}, timeout=30)
        log, _snap = await session_log(cluster.urls[1], cluster.tokens["alice"], s["id"])
        assert len(log) == 10
        for sub in subs:
            assert await collect(sub, 10, timeout=30) == log
        assert on_first, "the replica that shut down told its clients to reconnect"
        assert all(c.url.startswith(cluster.replicas[1].url.replace("http", "ws")) for c in on_first)
    finally:
        await asyncio.gather(*(c.close() for c in clients))
