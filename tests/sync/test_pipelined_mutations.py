"""Mutations one client sends back to back, without waiting for replies (over a real socket, on SQLite and
PostgreSQL): they apply in the order sent, each gets its own reply, and queue enqueues that pile up share
transactions instead of waiting for a commit each."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select
from testkit import collect

from chatsync_client import TrpcError
from server.store.models import Event


async def transactions_in_log(live, session_id: str) -> int:
    """How many transactions wrote the session's events: the rows one transaction appends share its
    timestamp (taken once, at its end), and two transactions are never within the same microsecond."""
    async with live.services.db.read() as s:
        stamps = (await s.execute(select(Event.created_at).where(Event.session_id == session_id))).scalars()
        return len(set(stamps))


async def outcome(call) -> object:
    try:
        return await call
    except TrpcError as exc:
        return exc.code


@pytest.fixture
async def server(db_url, server_factory):
    return await server_factory(db_url, max_queue_length=6, max_content_chars=100)


async def test_enqueues_sent_back_to_back_apply_in_order_in_fewer_transactions(server):
    async with server.client() as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        contents = [f"m{i}" for i in range(6)]
        replies = await asyncio.gather(
            *(c.mutation("message.enqueueMessage", {"sessionId": sid, "content": m}) for m in contents)
        )
        assert [r["content"] for r in replies] == contents
        assert len({r["id"] for r in replies}) == 6
        # They queued up behind the first call and shared transactions.
        assert 1 <= await transactions_in_log(server, sid) < 6
        queue = await c.query("message.getQueuedMessages", {"sessionId": sid})
        assert [q["id"] for q in queue] == [r["id"] for r in replies]
        snap = await c.query("session.get", {"sessionId": sid})
        assert snap["lastEventId"] == "6"


async def test_each_call_of_a_batch_fails_alone(server):
    async with server.client() as c, server.client("bob") as bob:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        other = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        bobs = (await bob.mutation("session.create", {"queuePaused": True}))["id"]
        calls = [
            {"sessionId": sid, "content": "a"},
            {"sessionId": sid},  # no content: invalid
            {"sessionId": sid, "content": "x" * 101},  # too long
            {"sessionId": bobs, "content": "not yours"},
            {"sessionId": other, "content": "elsewhere"},
        ] + [{"sessionId": sid, "content": f"fill{i}"} for i in range(6)]  # the queue holds 6: one too many
        results = await asyncio.gather(*(outcome(c.mutation("message.enqueueMessage", inp)) for inp in calls))
        assert results[1] == "BAD_REQUEST"
        assert results[2] == "PAYLOAD_TOO_LARGE"
        assert results[3] == "NOT_FOUND"
        assert results[-1] == "PRECONDITION_FAILED"
        applied = [r for r in results if isinstance(r, dict)]
        assert [r["content"] for r in applied] == ["a", "elsewhere"] + [f"fill{i}" for i in range(5)]
        queue = await c.query("message.getQueuedMessages", {"sessionId": sid})
        assert [q["content"] for q in queue] == ["a"] + [f"fill{i}" for i in range(5)]
        assert [q["content"] for q in await c.query("message.getQueuedMessages", {"sessionId": other})] == ["elsewhere"]
        assert await bob.query("message.getQueuedMessages", {"sessionId": bobs}) == []
        snap = await c.query("session.get", {"sessionId": sid})
        assert snap["lastEventId"] == "6"  # one event per message queued, none for the failures


async def test_other_mutations_in_between_keep_their_place(server):
    async with server.client() as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        await sub.wait_started()
        steps = [
            ("message.enqueueMessage", {"sessionId": sid, "content": "a"}),
            ("message.enqueueMessage", {"sessionId": sid, "content": "b"}),
            ("message.clearQueue", {"sessionId": sid}),
            ("message.enqueueMessage", {"sessionId": sid, "content": "c"}),
            ("message.enqueueMessage", {"sessionId": sid, "content": "d"}),
            ("message.dequeueMessage", {"sessionId": sid}),
            ("message.enqueueMessage", {"sessionId": sid, "content": "e"}),
        ]
        results = await asyncio.gather(*(c.mutation(path, inp) for path, inp in steps))
        assert results[5]["content"] == "c"
        queue = await c.query("message.getQueuedMessages", {"sessionId": sid})
        assert [q["content"] for q in queue] == ["d", "e"]
        types = [ev["type"] for _id, ev in await collect(sub, 7)]
        assert types == [
            "queue-message-added",
            "queue-message-added",
            "queue-cleared",
            "queue-message-added",
            "queue-message-added",
            "queue-message-removed",
            "queue-message-added",
        ]
