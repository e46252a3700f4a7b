"""Exactly-once client writes: a write repeated with its clientRequestId returns the first reply and changes
nothing — after a reply lost to a dropped connection, after a restart, in batches; another input under the
same id is CONFLICT; the events a write causes carry its id."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from scenario_kit import lose_the_reply, session_log

from chatsync_client import TrpcError


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
        await sub.wait_started()  # from now: the run must start after the subscription did
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


async def _records(md, user: str = "alice") -> dict[str, tuple[int, int]]:
    """The user's records: request id -> (seq, size of what the record keeps)."""
    from sqlalchemy import func, select

    from server.store.models import ClientRequest, User

    async with md.services.db.read() as s:
        rows = await s.execute(
            select(ClientRequest.request_id, ClientRequest.seq, func.length(ClientRequest.result))
            .join(User, User.id == ClientRequest.user_id)
            .where(User.name == user)
        )
        return {rid: (seq, size) for rid, seq, size in rows.all()}


async def test_records_are_compact_and_a_repeat_answers_as_the_first(md):
    """Records keep receipts of a few hundred bytes whatever the write carried; a repeat rebuilds the first
    reply from them (and from its own input), for every write that takes a clientRequestId."""
    big = "x" * 90_000
    tools = [{"name": f"tool_{i}", "description": big[:4000], "executor": "client"} for i in range(100)]
    tools.append({"name": "ask_user", "executor": "client"})
    async with md.client("alice") as c:
        create = {"title": "big", "tools": tools, "systemPrompt": big, "clientRequestId": "c-big"}
        session = await c.mutation("session.create", create)
        sid = session["id"]
        busy = (await c.mutation("session.create", {"queuePaused": True, "clientRequestId": "c-2"}))["id"]
        calls = [
            ("message.enqueueMessage", {"sessionId": busy, "content": big, "clientRequestId": "q-big"}),
            ("message.send", {"sessionId": sid, "content": big, "clientRequestId": "s-big"}),
            ("message.addInstructions", {"sessionId": sid, "instructions": [big[:50_000]] * 2, "clientRequestId": "i"}),
        ]
        firsts = [await c.mutation(path, inp) for path, inp in calls]
        sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        await _next_of(sub, "run-finished")
        tool_send = {"sessionId": sid, "content": "/tool ask_user {}", "clientRequestId": "s-tool"}
        await c.mutation("message.send", tool_send)
        call = await _next_of(sub, "tool-call-ready")
        submit = {
            "sessionId": sid,
            "toolOutputs": [{"callId": call["callId"], "output": big}],
            "clientRequestId": "o-big",
        }
        calls.append(("tool.submitOutputs", submit))
        firsts.append(await c.mutation("tool.submitOutputs", submit))
        await _next_of(sub, "run-finished")
        await sub.close()
        records = await _records(md)
        assert max(size for _seq, size in records.values()) < 400, records
        last = (await c.query("session.get", {"sessionId": sid}))["lastEventId"]
        assert await c.mutation("session.create", create) == session
        for (path, inp), first in zip(calls, firsts):
            assert await c.mutation(path, inp) == first, path
        assert (await c.query("session.get", {"sessionId": sid}))["lastEventId"] == last
        assert len(await c.query("message.getQueuedMessages", {"sessionId": busy})) == 1
        # A repeated create answers with the session as it was created, whatever happened to it since.
        await c.mutation("session.setTitle", {"sessionId": sid, "title": "renamed"})
        assert await c.mutation("session.create", create) == session


async def test_a_record_written_before_receipts_replays_its_whole_reply(md):
    """Records written by an earlier version keep the whole reply (``seq`` 0); a repeat still gets it."""
    import orjson
    from sqlalchemy import update

    from server.store.models import ClientRequest

    async with md.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        inp = {"sessionId": sid, "content": "old", "clientRequestId": "legacy"}
        first = await c.mutation("message.enqueueMessage", inp)
        async with md.services.db.write() as s:
            await s.execute(
                update(ClientRequest)
                .where(ClientRequest.request_id == "legacy")
                .values(seq=0, result=orjson.dumps(first).decode())
            )
        assert await c.mutation("message.enqueueMessage", inp) == first
        assert len(await c.query("message.getQueuedMessages", {"sessionId": sid})) == 1


async def test_records_per_user_are_bounded_oldest_first(db_url, server_factory):
    """At most CHATSYNC_MAX_REQUEST_RECORDS_PER_USER records per user, under concurrent writes from several
    connections into several sessions; the oldest go first, other users' stay."""
    live = await server_factory(db_url, users=("alice", "bob"), max_request_records_per_user=5)
    async with live.client("bob") as bob:
        bsid = (await bob.mutation("session.create", {"queuePaused": True, "clientRequestId": "b-0"}))["id"]
        await bob.mutation("message.enqueueMessage", {"sessionId": bsid, "content": "b", "clientRequestId": "b-1"})
    clients = [live.client("alice") for _ in range(3)]
    for c in clients:
        await c.connect()
    try:
        sids = [(await c.mutation("session.create", {"queuePaused": True}))["id"] for c in clients]

        def enqueue(sid: str, rid: str) -> dict[str, Any]:
            return {"sessionId": sid, "content": rid, "clientRequestId": rid}

        async def write(c, sid: str) -> None:
            for i in range(20):
                await c.mutation("message.enqueueMessage", enqueue(sid, f"{sid}-{i}"))

        await asyncio.gather(*(write(c, sid) for c, sid in zip(clients, sids)))
        records = await _records(live)
        assert sorted(seq for seq, _size in records.values()) == [56, 57, 58, 59, 60]
        assert set(await _records(live, "bob")) == {"b-0", "b-1"}
        lengths = [len(await clients[0].query("message.getQueuedMessages", {"sessionId": sid})) for sid in sids]
        assert lengths == [20, 20, 20]
        kept = max(records, key=lambda rid: records[rid][0])
        sid = kept.rsplit("-", 1)[0]
        await clients[0].mutation("message.enqueueMessage", enqueue(sid, kept))  # a repeat: nothing added
        assert len(await clients[0].query("message.getQueuedMessages", {"sessionId": sid})) == 20
        await clients[0].mutation("message.enqueueMessage", enqueue(sid, f"{sid}-0"))  # dropped: applied again
        assert len(await clients[0].query("message.getQueuedMessages", {"sessionId": sid})) == 21
    finally:
        for c in clients:
            await c.close()


async def test_a_second_answer_to_an_approval_is_conflict_and_changes_nothing(md):
    """One device denies a call; another device's later answer, either way, is CONFLICT and writes nothing. The
    decision stays on the call's entry in its message (``session.get``), the denial is the call's result, and the
    run goes on only once the client tool it also waits for has its output."""
    tools = [
        {"name": "calculator", "executor": "server", "requiresApproval": True},
        {"name": "ask_user", "executor": "client"},
    ]
    async with md.client("alice") as a, md.client("alice") as b:
        sid = (await a.mutation("session.create", {"tools": tools}))["id"]
        sub = await a.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        send = {"sessionId": sid, "content": '/tool calculator {"expression": "6*7"}\n/tool ask_user {}'}
        await a.mutation("message.send", send)
        events: list[dict[str, Any]] = []
        while not any(e["type"] == "session-updated" and e["session"]["status"] == "requires-action" for e in events):
            events.append((await sub.next(10))[1])
        calls = {e["name"]: e["callId"] for e in events if e["type"] == "tool-call-ready"}
        deny = {"sessionId": sid, "callId": calls["calculator"], "approved": False, "reason": "not now"}
        assert await a.mutation("tool.approve", deny) == {"resolved": True}
        denied = await _snapshot(a, sid)
        for approved in (True, False):
            with pytest.raises(TrpcError) as err:
                await b.mutation("tool.approve", {**deny, "approved": approved})
            assert err.value.code == "CONFLICT"
        with pytest.raises(TrpcError) as err:  # the denial is the call's result
            late = {"sessionId": sid, "toolOutputs": [{"callId": calls["calculator"], "output": "42"}]}
            await b.mutation("tool.submitOutputs", late)
        assert err.value.code == "CONFLICT"
        snap = await _snapshot(b, sid)
        # Nothing written, not even an event.
        assert snap["lastEventId"] == denied["lastEventId"] and snap["messages"] == denied["messages"]
        assert snap["session"]["status"] == "requires-action"  # still waiting for the client tool
        assert [c["callId"] for c in snap["run"]["pendingToolCalls"]] == [calls["ask_user"]]
        assert snap["run"]["pendingApprovals"] == []
        decisions = {c["name"]: c["decision"] for m in snap["messages"] for c in m["toolCalls"] or []}
        assert decisions["ask_user"] is None
        assert decisions["calculator"]["approved"] is False and decisions["calculator"]["userName"] == "alice"
        results = [(m["toolCallId"], m["outcome"]) for m in snap["messages"] if m["role"] == "tool"]
        assert results == [(calls["calculator"], "denied")]
        assert "not now" in next(m["content"] for m in snap["messages"] if m["role"] == "tool")

        submit = {"sessionId": sid, "toolOutputs": [{"callId": calls["ask_user"], "output": "yes"}]}
        assert (await b.mutation("tool.submitOutputs", submit))["resumed"] is True
        await _next_of(sub, "run-finished")
        snap = await _snapshot(a, sid)
        assert [m["outcome"] for m in snap["messages"] if m["role"] == "tool"] == ["denied", "ok"]
        resolved = [e for _i, e in (await session_log(md.url, md.tokens["alice"], sid))[0]]
        assert [e["approved"] for e in resolved if e["type"] == "tool-approval-resolved"] == [False]
        await sub.close()


async def _snapshot(client: Any, sid: str) -> dict[str, Any]:
    return await client.query("session.get", {"sessionId": sid})
