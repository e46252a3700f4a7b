"""Runs across replicas: 50 clients on two replicas (PostgreSQL + Redis) queue messages while answers
stream; every queued message is sent exactly once, in queue order, whichever replica runs it."""

from __future__ import annotations

import asyncio
from collections import Counter

from scenario_kit import open_clients
from testkit import collect


async def test_fifty_clients_queue_while_runs_stream(cluster_factory):
    cluster = await cluster_factory(
        2, CHATSYNC_ECHO_DELAY="0.002", CHATSYNC_MAX_QUEUE_LENGTH="500", CHATSYNC_SWEEP_SECONDS="0.5"
    )
    clients = await open_clients(cluster, 50)
    try:
        s = await clients[0].mutation("session.create", {})
        sid = s["id"]
        watcher = clients[1]
        sub = await watcher.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        await clients[0].mutation("message.send", {"sessionId": sid, "content": " ".join(["start"] * 40)})

        async def send(c, i: int) -> dict:
            return await c.mutation("message.send", {"sessionId": sid, "content": f"m{i:02d}"})

        results = await asyncio.gather(*(send(c, i) for i, c in enumerate(clients)))
        assert {r["status"] for r in results} <= {"queued", "started"}

        # Wait until everything has been answered and the session is idle with an empty queue.
        async with type(watcher)(cluster.urls[1], cluster.tokens["alice"]) as probe:
            for _ in range(600):
                snap = await probe.query("session.get", {"sessionId": sid})
                if snap["session"]["status"] == "idle" and not snap["queue"]:
                    break
                await asyncio.sleep(0.1)
        assert snap["session"]["status"] == "idle" and snap["queue"] == []

        users = [m["content"] for m in snap["messages"] if m["role"] == "user"]
        answers = [m["content"] for m in snap["messages"] if m["role"] == "assistant"]
        sent = [f"m{i:02d}" for i in range(50)]
        assert Counter(users) == Counter([" ".join(["start"] * 40), *sent])  # each exactly once
        assert sorted(answers) == sorted(users)  # each answered once (echo)

        events = await collect(sub, int(snap["lastEventId"]), timeout=60)
        added = [e["message"]["id"] for _i, e in events if e["type"] == "queue-message-added"]
        removed = [e["messageId"] for _i, e in events if e["type"] == "queue-message-removed" and e["reason"] == "sent"]
        assert removed == added  # sent in queue order, every one
        by_id = {e["message"]["id"]: e["message"]["content"] for _i, e in events if e["type"] == "queue-message-added"}
        queued_contents = [by_id[i] for i in added]
        later_users = [u for u in users if u in set(queued_contents)]
        assert later_users == queued_contents  # the history has them in the queue's order
        starts = [e for _i, e in events if e["type"] == "run-started"]
        assert len(starts) == 51 and len({e["runId"] for e in starts}) == 51
    finally:
        await asyncio.gather(*(c.close() for c in clients))
