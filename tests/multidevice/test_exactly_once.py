"""Exactly-once client writes: a write repeated with its clientRequestId returns the first reply and changes
nothing — after a reply lost to a dropped connection, after a restart, in batches; another input under the
same id is CONFLICT; the events a write causes carry its id."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from scenario_kit import lose_the_reply, session_log

from server.client import TrpcError


async def test_reply_lost_then_retried_enqueues_once(md):
    """The server commits the enqueue, the reply never reaches the client (its socket dies), the client
    retries with the same id on a new connection: one queued message, one event, the first reply."""
    crid = str(uuid.uuid4())
    async with md.client("alice") as direct:
        sid = (await direct.mutation("session.create", {"title": "t", "queuePaused": True}))["id"]
        inp = {"sessionId": sid, "content": "typed once", "clientRequestId": crid}

        async def committed() -> bool:
            return len(await direct.query("message.getQueuedMessages", {"sessionId": sid})) == 1

        await lose_the_reply(md.url, md.tokens["alice"], "message.enqueueMessage", inp, committed)
        retry = await direct.mutation("message.enqueueMessage", inp)
        queue = await direct.query("message.getQueuedMessages", {"sessionId": sid})
        assert [q["id"] for q in queue] == [retry["id"]]
        assert retry["clientRequestId"] == crid and queue[0]["clientRequestId"] == crid
        log, _snap = await session_log(md.url, md.tokens["alice"], sid)
        added = [e for _i, e in log if e["type"] == "queue-message-added"]
        assert len(added) == 1 and added[0]["message"]["clientRequestId"] == crid


async def test_same_id_other_input_is_conflict_and_changes_nothing(md):
    crid = str(uuid.uuid4())
    async with md.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        first = await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "a", "clientRequestId": crid})
        before = await c.query("session.get", {"sessionId": sid})
        with pytest.raises(TrpcError) as err:
            await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "b", "clientRequestId": crid})
        assert err.value.code == "CONFLICT"
        with pytest.raises(TrpcError) as err:  # the same id for another procedure
            await c.mutation("message.send", {"sessionId": sid, "content": "a", "clientRequestId": crid})
        assert err.value.code == "CONFLICT"
        assert await c.query("session.get", {"sessionId": sid}) == before
        again = await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "a", "clientRequestId": crid})
        assert again == first
    async with md.client("bob") as bob:  # ids are per user: bob's own write with the same id is his
        bsid = (await bob.mutation("session.create", {"queuePaused": True}))["id"]
        mine = await bob.mutation(
            "message.enqueueMessage", {"sessionId": bsid, "content": "b", "clientRequestId": crid}
        )
        assert mine["content"] == "b"


async def test_retry_after_restart_changes_nothing(db_url, server_factory):
    live = await server_factory(db_url, users=("alice",))
    crid = str(uuid.uuid4())
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True, "clientRequestId": crid + "-s"}))["id"]
        first = await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "x", "clientRequestId": crid})
    await live.stop()
    again = await server_factory(db_url, users=("alice",), tokens=live.tokens)  # same database, new server
    async with again.client("alice") as c:
        assert (await c.mutation("session.create", {"queuePaused": True, "clientRequestId": crid + "-s"}))["id"] == sid
        assert (
            await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "x", "clientRequestId": crid})
            == first
        )
        assert len(await c.query("message.getQueuedMessages", {"sessionId": sid})) == 1
        assert len((await c.query("session.list", {}))["items"]) == 1


async def test_every_idempotent_write_replays(md):
    """send, addInstructions, create, submitOutputs and approve: the repeat returns the first reply and
    writes no event; the events of the first call carry its id (user message, run-started)."""
    tools = [
        {"name": "ask_user", "executor": "client"},
        {"name": "current_time", "executor": "server", "requiresApproval": True},
    ]
    async with md.client("alice") as c:
        create = {"title": "ids", "tools": tools, "clientRequestId": "create-1"}
        s = await c.mutation("session.create", create)
        assert await c.mutation("session.create", create) == s
        sid = s["id"]
        assert len((await c.query("session.list", {}))["items"]) == 1

        send = {"sessionId": sid, "content": "/tool ask_user {}\n/tool current_time {}", "clientRequestId": "send-1"}
        sent = await c.mutation("message.send", send)
        sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        events: list[dict[str, Any]] = []
        while not any(e["type"] == "tool-approval-requested" for e in events) or not any(
            e["type"] == "session-updated" and e["session"]["status"] == "requires-action" for e in events
        ):
            events.append((await sub.next(10))[1])
        assert await c.mutation("message.send", send) == sent
        started = next(e for e in events if e["type"] == "run-started")
        user_msg = next(e for e in events if e["type"] == "message-created" and e["message"]["role"] == "user")
        assert started["clientRequestId"] == "send-1" and user_msg["message"]["clientRequestId"] == "send-1"

        calls = {e["name"]: e["callId"] for e in events if e["type"] == "tool-call-ready"}
        approve = {"sessionId": sid, "callId": calls["current_time"], "approved": True, "clientRequestId": "ap-1"}
        assert await c.mutation("tool.approve", approve) == {"resolved": True}
        assert await c.mutation("tool.approve", approve) == {"resolved": True}  # not CONFLICT: a repeat
        resolved = await _next_of(sub, "tool-approval-resolved")
        assert resolved["decidedBy"]["userName"] == "alice"
        submit = {
            "sessionId": sid,
            "toolOutputs": [{"callId": calls["ask_user"], "output": "42"}],
            "clientRequestId": "out-1",
        }
        out = await c.mutation("tool.submitOutputs", submit)
        assert await c.mutation("tool.submitOutputs", submit) == out
        await _next_of(sub, "run-finished")

        instr = {"sessionId": sid, "instructions": ["be brief"], "respond": False, "clientRequestId": "ins-1"}
        first = await c.mutation("message.addInstructions", instr)
        last = (await c.query("session.get", {"sessionId": sid}))["lastEventId"]
        assert await c.mutation("message.addInstructions", instr) == first
        assert await c.mutation("message.send", send) == sent
        assert (await c.query("session.get", {"sessionId": sid}))["lastEventId"] == last
        snap = await c.query("session.get", {"sessionId": sid})
        assert [m["clientRequestId"] for m in snap["messages"] if m["role"] == "system"] == ["ins-1"]
        await sub.close()


async def _next_of(sub, type_: str) -> dict[str, Any]:
    while True:
        _id, e = await sub.next(10)
        if e["type"] == type_:
            return e


async def test_auto_sent_message_carries_its_enqueue_id(md):
    async with md.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "later", "clientRequestId": "q-1"})
        sub = await c.subscribe("session.events", {"sessionId": sid})
        await c.mutation("message.resumeQueue", {"sessionId": sid})
        started = await _next_of(sub, "run-started")
        assert started["trigger"] == "queue" and started["clientRequestId"] == "q-1"
        snap = await c.query("session.get", {"sessionId": sid})
        assert [m["clientRequestId"] for m in snap["messages"] if m["role"] == "user"] == ["q-1"]
        await sub.close()


async def test_pipelined_enqueues_with_repeated_ids_apply_once(md):
    """Enqueues sent back to back go through the batch path: a repeat inside one batch, and across
    batches, returns the first reply; a conflicting one fails alone."""
    async with md.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        inputs = [{"sessionId": sid, "content": f"m{i % 3}", "clientRequestId": f"b-{i % 3}"} for i in range(9)]
        inputs.append({"sessionId": sid, "content": "other", "clientRequestId": "b-0"})
        results = await asyncio.gather(
            *(c.mutation("message.enqueueMessage", i) for i in inputs), return_exceptions=True
        )
        assert isinstance(results[-1], TrpcError) and results[-1].code == "CONFLICT"
        ids = [r["id"] for r in results[:-1]]
        assert ids[:3] * 3 == ids and len(set(ids)) == 3
        queue = await c.query("message.getQueuedMessages", {"sessionId": sid})
        assert [q["content"] for q in queue] == ["m0", "m1", "m2"]


async def test_old_records_are_trimmed(md):
    """Records older than the retention are deleted by the sweeper's trim; newer ones stay."""
    from datetime import timedelta

    from sqlalchemy import func, select, update

    from server.services import requests
    from server.store.models import ClientRequest, utcnow

    async with md.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True, "clientRequestId": "keep"}))["id"]
        await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": "x", "clientRequestId": "old"})
    db = md.services.db
    async with db.write() as s:
        await s.execute(
            update(ClientRequest)
            .where(ClientRequest.request_id == "old")
            .values(created_at=utcnow() - requests.RETENTION - timedelta(minutes=1))
        )
    async with db.write() as s:
        assert await requests.trim(s, utcnow()) == 1
    async with db.read() as s:
        left = (await s.execute(select(ClientRequest.request_id))).scalars().all()
        assert left == ["keep"]
        assert (await s.execute(select(func.count()).select_from(ClientRequest))).scalar_one() == 1
