"""A client of another replica joins a stream mid-answer: one snapshot of the exact partial text, then the
deltas after it — no character missing, none twice (the partial text is shared through Redis)."""

from __future__ import annotations

import asyncio

import pytest

from chatsync_client import TrpcClient


async def assemble(sub, message_id_box: dict, until_completed: bool = True, timeout: float = 30):
    """Rebuild the streaming text from snapshot + deltas, checking every offset on the way."""
    text = None
    final = None
    snapshots = 0

    async def loop():
        nonlocal text, final, snapshots
        while True:
            _id, ev = await sub.next(timeout)
            t = ev["type"]
            if t == "stream-snapshot":
                snapshots += 1
                message_id_box.setdefault("id", ev["messageId"])
                assert text is None or ev["offset"] >= 0
                text = ev["text"]
                assert len(text) == ev["offset"]
            elif t == "text-delta":
                message_id_box.setdefault("id", ev["messageId"])
                if text is None:
                    assert ev["offset"] == 0, ev  # joined before the first delta
                    text = ""
                assert ev["offset"] == len(text), (ev["offset"], len(text))  # no gap, no repeat
                text += ev["delta"]
            elif t == "message-completed" and ev["message"]["role"] == "assistant":
                final = ev["message"]["content"]
                return

    await asyncio.wait_for(loop(), timeout)
    return text, final, snapshots


@pytest.mark.parametrize("bus", ["redis", "redis-cluster"])
async def test_join_mid_stream_on_the_other_replica(cluster_factory, bus, request):
    bus_url = request.getfixturevalue("redis_cluster_url") if bus == "redis-cluster" else None
    cluster = await cluster_factory(2, bus_url=bus_url, CHATSYNC_ECHO_DELAY="0.01")
    a_url, b_url = cluster.urls
    token = cluster.tokens["alice"]
    words = [f"w{i}" for i in range(150)]
    async with TrpcClient(a_url, token) as a, TrpcClient(b_url, token) as b:
        s = await a.mutation("session.create", {})
        early = await a.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"})
        await a.mutation("message.send", {"sessionId": s["id"], "content": " ".join(words)})
        box: dict = {}
        # Wait until the answer is well under way on replica A...
        seen = 0
        while seen < 30:
            _i, ev = await early.next(10)
            if ev["type"] == "text-delta":
                seen += 1
        # ...then a client of replica B joins, from the start of the log.
        late = await b.subscribe("session.events", {"sessionId": s["id"], "lastEventId": "0"})
        text, final, snapshots = await assemble(late, box)
        assert snapshots == 1
        assert final is not None and text == final
        assert final.split() == words
