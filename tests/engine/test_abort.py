"""run.abort from any client: the provider stream stops within a second, the partial answer is kept and marked."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from engine_helpers import FAST, idle, subscribe
from sqlalchemy import update

from chatsync_client import TrpcError
from server.engine import run as run_module
from server.store.models import ChatSession

LONG = " ".join(f"z{i}" for i in range(2000))


async def test_abort_from_another_client_stops_the_stream(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, **{**FAST, "echo_delay": 0.01})
    async with live.client() as a, live.client() as b:
        s = await a.mutation("session.create", {})
        st = await subscribe(a, s["id"])
        res = await a.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await a.mutation("message.send", {"sessionId": s["id"], "content": "queued meanwhile"})
        await st.until_type("text-delta", 10)
        assert (await b.mutation("run.abort", {"sessionId": s["id"]})) == {"aborted": True}
        aborted = await st.until(lambda e: e["type"] == "run-aborted")
        assert aborted["runId"] == res["runId"]
        completed = next(e for e in st.of("message-completed") if e["message"]["role"] == "assistant")
        assert completed["message"]["status"] == "interrupted"
        assert completed["message"]["finishReason"] == "aborted"
        partial = completed["message"]["content"]
        assert st.text_of(completed["message"]["id"]) == partial and 0 < len(partial) < len(LONG)
        # Nothing streams after the abort: an event caused after it (a title set by hand) arrives with no
        # text between the completed message and it.
        await b.mutation("session.setTitle", {"sessionId": s["id"], "title": "after the abort"})
        await st.until(lambda e: e["type"] == "title-changed" and e["title"] == "after the abort")
        done_at = st.events.index(completed)
        assert not [e for e in st.events[done_at:] if e["type"] == "text-delta"]
        snap = await idle(a, s["id"])
        assert snap["messages"][-1]["content"] == partial and snap["messages"][-1]["status"] == "interrupted"
        assert snap["session"]["queuePaused"] is True and [q["content"] for q in snap["queue"]] == ["queued meanwhile"]
        await st.until(lambda e: e["type"] == "queue-paused")
        assert (await b.mutation("run.abort", {"sessionId": s["id"]})) == {"aborted": False}


async def test_abort_flag_set_by_another_replica_is_noticed(server_factory, sqlite_url):
    """Another replica cannot reach our task; it sets the flag on the session row, which the owner polls."""
    live = await server_factory(
        sqlite_url, **{**FAST, "echo_delay": 0.01, "bus_url": "memory://", "stream_flush_seconds": 0.3}
    )
    async with live.client() as a:
        s = await a.mutation("session.create", {})
        st = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await st.until_type("text-delta", 5)
        async with live.services.db.write() as db:
            await db.execute(update(ChatSession).where(ChatSession.id == s["id"]).values(abort_requested=True))
        # The loop polls the flag while it streams: the run ends long before the answer would have.
        await st.until(lambda e: e["type"] == "run-aborted", timeout=5)
        assert not [e for e in st.events if e["type"] == "message-completed" and e["message"]["content"] == LONG]
        await idle(a, s["id"])


async def test_abort_while_waiting_for_a_client_tool(engine):
    async with engine.client() as a:
        s = await a.mutation("session.create", {"tools": [{"name": "ask", "executor": "client"}]})
        st = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": "/tool ask {}"})
        await st.until(lambda e: e["type"] == "session-updated" and e["session"]["status"] == "requires-action")
        assert (await a.mutation("run.abort", {"sessionId": s["id"]})) == {"aborted": True}
        await st.until(lambda e: e["type"] == "run-aborted")
        snap = await idle(a, s["id"])
        assert snap["session"]["status"] == "idle"
        # a client's output arriving after the abort is refused: the model has moved on, and nothing is stored
        call_id = next(e["callId"] for e in st.events if e["type"] == "tool-call-ready")
        with pytest.raises(TrpcError) as late:
            await a.mutation(
                "tool.submitOutputs", {"sessionId": s["id"], "toolOutputs": [{"callId": call_id, "output": "too late"}]}
            )
        assert late.value.code == "CONFLICT"
        assert (await a.query("session.get", {"sessionId": s["id"]}))["messages"] == snap["messages"]
        # the call closed by the abort (a cancelled result) does not break the next request
        await a.mutation("message.send", {"sessionId": s["id"], "content": "go on"})
        await st.until(lambda e: e["type"] == "run-finished")
        snap = await idle(a, s["id"])
        assert snap["messages"][-1]["content"] == "go on"


async def test_a_heartbeat_that_saw_the_last_runs_abort_does_not_stop_the_next(server_factory, sqlite_url, monkeypatch):
    """ "Send now" aborts the answer in progress and the queue's head goes at once, in the abort's transaction. A
    heartbeat that read the session's abort flag for the run before and answers only after the loop moved on to
    the new run must not stop the new one: the message sent now is answered, and the queue keeps going."""
    live = await server_factory(sqlite_url, **{**FAST, "echo_delay": 0.01})
    orchestrator = live.services.orchestrator
    real = run_module.heartbeat
    armed, holding = asyncio.Event(), asyncio.Event()
    stale: list[str] = []

    async def late(uow: Any, session_id: str, run_id: str, *args: Any) -> bool:
        asked = await real(uow, session_id, run_id, *args)
        if not armed.is_set() or stale:
            return asked
        # Once: a heartbeat of the run in progress whose read comes after the send-now's commit (it says abort)
        # and whose answer comes after the loop went on to the next run.
        holding.set()
        loop = orchestrator.local_loop(session_id)
        while loop is not None and loop.run_id == run_id:
            await asyncio.sleep(0.01)
        stale.append(run_id)
        return True

    monkeypatch.setattr(run_module, "heartbeat", late)
    async with live.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        first = await c.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        queued = await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "now please"})
        await st.until_type("text-delta", 5)
        armed.set()
        await holding.wait()
        sent = await c.mutation(
            "message.sendQueuedNow", {"sessionId": s["id"], "messageId": queued["id"], "mode": "interrupt"}
        )
        assert sent["status"] == "interrupting"
        snap = await idle(c, s["id"])
    assert stale and stale[0] == first["runId"]  # a heartbeat of the aborted run answered after the next began
    answers = [m for m in snap["messages"] if m["role"] == "assistant"]
    assert [m["status"] for m in answers] == ["interrupted", "complete"], answers
    assert snap["messages"][-2]["content"] == "now please" and answers[-1]["content"] == "now please"
    assert snap["session"]["queuePaused"] is False and snap["queue"] == []
