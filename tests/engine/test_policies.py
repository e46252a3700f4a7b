"""Busy policies of message.send (docs/runs.md): enqueue (test_queue.py), reject, interrupt, steer."""

from __future__ import annotations

import pytest
from engine_helpers import FAST, idle, subscribe

from chatsync_client import TrpcError

LONG = " ".join(f"y{i}" for i in range(300))


@pytest.fixture
async def slow(server_factory, sqlite_url):
    return await server_factory(sqlite_url, **{**FAST, "echo_delay": 0.005})


async def test_reject_is_conflict_and_writes_nothing(slow):
    async with slow.client() as c:
        s = await c.mutation("session.create", {"busyPolicy": "reject"})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await st.until_type("text-delta", 2)
        before = await c.query("session.get", {"sessionId": s["id"]})
        with pytest.raises(TrpcError) as err:
            await c.mutation("message.send", {"sessionId": s["id"], "content": "no", "instructions": "x"})
        assert err.value.code == "CONFLICT"
        after = await c.query("session.get", {"sessionId": s["id"]})
        assert after["lastEventId"] == before["lastEventId"] and after["queue"] == []
        assert len(after["messages"]) == 2
        # the per-call policy overrides the session's
        assert (await c.mutation("message.send", {"sessionId": s["id"], "content": "q", "busyPolicy": "enqueue"}))[
            "status"
        ] == "queued"
        await st.until_type("run-finished", 2, timeout=15)


async def test_interrupt_aborts_then_sends(slow):
    async with slow.client() as a, slow.client() as b:
        s = await a.mutation("session.create", {})
        st = await subscribe(a, s["id"])
        first = await a.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await st.until_type("text-delta", 5)
        res = await b.mutation(
            "message.send", {"sessionId": s["id"], "content": "stop that", "busyPolicy": "interrupt"}
        )
        assert res["status"] == "started" and res["runId"] != first["runId"]
        aborted = await st.until(lambda e: e["type"] == "run-aborted")
        assert aborted["runId"] == first["runId"]
        await st.until(lambda e: e["type"] == "run-finished")
        snap = await idle(a, s["id"])
        roles = [(m["role"], m["status"], m["finishReason"]) for m in snap["messages"]]
        assert roles == [
            ("user", "complete", None),
            ("assistant", "interrupted", "aborted"),
            ("user", "complete", None),
            ("assistant", "complete", "stop"),
        ]
        partial = snap["messages"][1]["content"]
        assert 0 < len(partial) < len(LONG) and LONG.startswith(partial)
        assert st.text_of(snap["messages"][1]["id"]) == partial
        assert snap["messages"][3]["content"] == "stop that"
        assert snap["session"]["queuePaused"] is False


async def test_steer_is_answered_within_the_same_run(slow):
    async with slow.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        first = await c.mutation("message.send", {"sessionId": s["id"], "content": " ".join(LONG.split()[:60])})
        await st.until_type("text-delta", 3)
        res = await c.mutation("message.send", {"sessionId": s["id"], "content": "also this", "busyPolicy": "steer"})
        assert res["status"] == "steered" and res["runId"] == first["runId"]
        assert res["message"]["runId"] == first["runId"]
        await st.until(lambda e: e["type"] == "run-finished")
        snap = await idle(c, s["id"])
        assert len(st.of("run-started")) == 1
        answers = [m for m in snap["messages"] if m["role"] == "assistant"]
        assert [a["runId"] for a in answers] == [first["runId"]] * 2
        assert answers[1]["content"] == "also this"  # the second step answered the steered message
        assert snap["queue"] == []


async def test_steer_when_idle_just_sends(slow):
    async with slow.client() as c:
        s = await c.mutation("session.create", {"busyPolicy": "steer"})
        res = await c.mutation("message.send", {"sessionId": s["id"], "content": "hi"})
        assert res["status"] == "started"
        await idle(c, s["id"])
