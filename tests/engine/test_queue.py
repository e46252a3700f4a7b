"""Auto-send: messages typed while the model answers wait in the queue and go out by themselves,
in order, exactly once; after an error or an abort the queue waits (paused) until resumed or a new send."""

from __future__ import annotations

import asyncio

from engine_helpers import FAST, idle, subscribe, wait_for

LONG = " ".join(f"x{i}" for i in range(60))


def user_and_answers(snap):
    return [(m["role"], m["content"]) for m in snap["messages"] if m["role"] in ("user", "assistant")]


async def test_enqueue_during_streaming_then_auto_send_in_order(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, **{**FAST, "echo_delay": 0.005})
    async with live.client() as a, live.client() as b:
        s = await a.mutation("session.create", {})
        st = await subscribe(b, s["id"])
        first = await a.mutation("message.send", {"sessionId": s["id"], "content": LONG})
        await st.until_type("text-delta", 3)
        queued = []
        for i, client in enumerate((b, a, b)):
            res = await client.mutation("message.send", {"sessionId": s["id"], "content": f"next {i}"})
            assert res["status"] == "queued" and "message" not in res
            queued.append(res["queued"])
        await st.until_type("run-finished", 4, timeout=15)
        snap = await idle(a, s["id"])
        assert user_and_answers(snap) == [("user", LONG), ("assistant", LONG)] + [
            pair for i in range(3) for pair in (("user", f"next {i}"), ("assistant", f"next {i}"))
        ]
        assert snap["queue"] == []
        sent = list(st.of("queue-message-removed"))
        assert [(e["messageId"], e["reason"]) for e in sent] == [(q["id"], "sent") for q in queued]
        starts = st.of("run-started")
        assert [e["trigger"] for e in starts] == ["message", "queue", "queue", "queue"]
        assert starts[0]["runId"] == first["runId"] and len({e["runId"] for e in starts}) == 4
        # auto-send happens inside the finishing transaction: run-finished, removed, user message, run-started
        types = [e["type"] for e in st.events if e["type"] not in ("text-delta",)]
        i = types.index("run-finished")
        assert types[i : i + 4] == ["run-finished", "queue-message-removed", "message-created", "run-started"]


async def test_error_pauses_the_queue_until_resumed(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "later 0"})
        # An idle session with an unpaused queue gets it sent by the sweeper (nobody else would send it).
        await st.until(lambda e: e["type"] == "run-finished")
        await idle(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": LONG + "\n/fail after=40"})
        await st.until_type("text-delta", 2 + 1)
        for i in (1, 2):
            assert (await c.mutation("message.send", {"sessionId": s["id"], "content": f"later {i}"}))[
                "status"
            ] == "queued"
        await st.until(lambda e: e["type"] == "run-failed")
        await st.until(lambda e: e["type"] == "queue-paused")
        # a whole sweep, ending after the queue paused, leaves a paused queue alone
        assert await engine.services.orchestrator.sweep_once() == 0
        snap = await idle(c, s["id"])
        assert snap["session"]["queuePaused"] is True
        assert [q["content"] for q in snap["queue"]] == ["later 1", "later 2"]
        res = await c.mutation("message.resumeQueue", {"sessionId": s["id"]})
        assert res["runId"]
        await st.until(lambda e: e["type"] == "queue-resumed")
        await st.until_type("run-finished", 3)
        snap = await idle(c, s["id"])
        assert [m["content"] for m in snap["messages"] if m["role"] == "user"][-2:] == ["later 1", "later 2"]
        assert snap["queue"] == [] and snap["session"]["queuePaused"] is False
        assert (await c.mutation("message.resumeQueue", {"sessionId": s["id"]})) == {"runId": None}


async def test_a_new_send_resumes_a_paused_queue(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": "x\n/fail"})
        await st.until(lambda e: e["type"] == "queue-paused")
        await idle(c, s["id"])
        await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "waiting"})
        assert await engine.services.orchestrator.sweep_once() == 0  # a whole sweep sends nothing from it
        assert len((await c.query("session.get", {"sessionId": s["id"]}))["queue"]) == 1
        res = await c.mutation("message.send", {"sessionId": s["id"], "content": "fresh"})
        assert res["status"] == "started"
        await st.until(lambda e: e["type"] == "queue-resumed")
        await st.until_type("run-finished", 2)
        snap = await idle(c, s["id"])
        assert [m["content"] for m in snap["messages"] if m["role"] == "user"] == ["x\n/fail", "fresh", "waiting"]


async def test_every_queued_message_is_sent_exactly_once_under_concurrent_clients(engine):
    clients = [engine.client() for _ in range(4)]
    for c in clients:
        await c.connect()
    try:
        s = await clients[0].mutation("session.create", {})
        st = await subscribe(clients[0], s["id"])

        async def writer(k: int, c) -> None:
            for i in range(5):
                await c.mutation("message.send", {"sessionId": s["id"], "content": f"c{k} m{i}"})

        await asyncio.gather(*(writer(k, c) for k, c in enumerate(clients)))
        await wait_for(lambda: _settled(clients[0], s["id"], 20), timeout=20)
        snap = await clients[0].query("session.get", {"sessionId": s["id"]})
        users = [m["content"] for m in snap["messages"] if m["role"] == "user"]
        assert sorted(users) == sorted(f"c{k} m{i}" for k in range(4) for i in range(5))
        for k in range(4):  # each client's messages keep their order
            mine = [u for u in users if u.startswith(f"c{k} ")]
            assert mine == [f"c{k} m{i}" for i in range(5)]
        answers = [m["content"] for m in snap["messages"] if m["role"] == "assistant"]
        assert answers == users
        await st.until_type("run-finished", 20)
    finally:
        for c in clients:
            await c.close()


async def _settled(client, session_id, n):
    snap = await client.query("session.get", {"sessionId": session_id})
    done = [m for m in snap["messages"] if m["role"] == "assistant" and m["status"] == "complete"]
    return len(done) == n and snap["run"] is None


async def test_enqueue_on_an_idle_session_is_sent_at_once(server_factory, sqlite_url):
    """Nothing is running, so nothing would end and send it: enqueueMessage on an idle session sends it,
    without waiting for the sweeper (set far away here); on a held queue it waits."""
    live = await server_factory(sqlite_url, **{**FAST, "sweep_seconds": 600})
    async with live.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        q = await c.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "hello there"})
        removed = await st.until_type("queue-message-removed", 1, timeout=5)
        assert (removed[0]["messageId"], removed[0]["reason"]) == (q["id"], "sent")
        snap = await idle(c, s["id"])
        assert user_and_answers(snap) == [("user", "hello there"), ("assistant", "hello there")]
        held = await c.mutation("session.create", {"queuePaused": True})
        hst = await subscribe(c, held["id"])
        await c.mutation("message.enqueueMessage", {"sessionId": held["id"], "content": "wait"})
        # The enqueue decides in its own transaction whether a run starts; the queue's next event (resuming
        # it) shows what the held queue did before: no run started, the message still waiting.
        await c.mutation("message.resumeQueue", {"sessionId": held["id"]})
        await hst.until_type("queue-resumed", 1)
        before = hst.events[: hst.events.index(hst.of("queue-resumed")[0])]
        assert [e["type"] for e in before if e["type"].startswith(("run-", "queue-message-removed"))] == []
