"""Token streaming to many clients, clients joining mid-stream, blocking mode, instructions."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from engine_helpers import FAST, idle, subscribe

WORDS = " ".join(f"w{i}" for i in range(40))


async def test_three_clients_get_identical_streams(engine):
    clients = [engine.client() for _ in range(3)]
    for c in clients:
        await c.connect()
    try:
        s = await clients[0].mutation("session.create", {})
        streams = [await subscribe(c, s["id"]) for c in clients]
        res = await clients[1].mutation("message.send", {"sessionId": s["id"], "content": WORDS})
        assert res["status"] == "started" and res["message"]["role"] == "user" and res["runId"]
        for st in streams:
            await st.until(lambda e: e["type"] == "session-updated" and e["session"]["status"] == "idle")
        snap = await idle(clients[2], s["id"])
        user, answer = snap["messages"]
        assert user["content"] == WORDS and user["runId"] == res["runId"]
        assert answer["content"] == WORDS and answer["status"] == "complete" and answer["finishReason"] == "stop"
        texts = [st.text_of(answer["id"]) for st in streams]
        assert texts == [WORDS] * 3
        deltas = [[(e["offset"], e["delta"]) for e in st.of("text-delta")] for st in streams]
        assert deltas[0] == deltas[1] == deltas[2] and len(deltas[0]) == 40  # word by word
        durable = [[e["type"] for e in st.events if e["type"] not in ("text-delta",)] for st in streams]
        assert (
            durable[0]
            == durable[1]
            == durable[2]
            == [
                "message-created",
                "title-changed",
                "run-started",
                "session-updated",
                "message-created",
                "message-completed",
                "run-finished",
                "session-updated",
            ]
        )
        finished = streams[0].of("run-finished")[0]
        assert finished["runId"] == res["runId"] and finished["finishReason"] == "stop"
        assert finished["usage"] == answer["usage"] == {"inputTokens": 40, "outputTokens": 40}
        assert snap["session"]["usage"] == {"inputTokens": 40, "outputTokens": 40}
        assert snap["session"]["status"] == "idle"
    finally:
        for c in clients:
            await c.close()


async def test_usage_is_summed_per_session_across_runs(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        await c.mutation("message.send", {"sessionId": s["id"], "content": "one two"})
        await idle(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": "three"})
        snap = await idle(c, s["id"])
        # second request sees the whole history: 2 + 2 + 1 prompt words, 1 answer word
        assert snap["session"]["usage"] == {"inputTokens": 2 + 5, "outputTokens": 2 + 1}


async def test_client_joining_mid_stream_ends_with_the_same_text(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, **{**FAST, "echo_delay": 0.01})
    text = " ".join(f"token{i}" for i in range(120))
    async with live.client() as a, live.client() as b, live.client() as c:
        s = await a.mutation("session.create", {})
        early = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": text})
        await early.until_type("text-delta", 30)
        # b joins from the start of the log mid-stream; c joins "from now" (no lastEventId) mid-stream.
        late = await subscribe(b, s["id"], "0")
        now = await subscribe(c, s["id"], None)
        await early.until_type("text-delta", 60)
        await c.drop_connection()  # and c's socket drops mid-stream: it resumes with its last id
        completed = await early.until(
            lambda e: e["type"] == "message-completed" and e["message"]["role"] == "assistant"
        )
        mid = completed["message"]["id"]
        for st in (late, now):
            await st.until(lambda e: e["type"] == "message-completed" and e["message"]["role"] == "assistant")
        assert early.text_of(mid) == late.text_of(mid) == now.text_of(mid) == text
        snapshots = late.of("stream-snapshot")
        assert snapshots and 0 < snapshots[0]["offset"] < len(text)
        assert len(late.of("text-delta")) < len(early.of("text-delta"))
        assert c.connects >= 2


async def test_a_catch_up_and_the_snapshot_it_sent_are_logged_at_debug(server_factory, sqlite_url, caplog):
    caplog.set_level(logging.DEBUG, logger="server.sync.delivery")
    live = await server_factory(sqlite_url, **{**FAST, "echo_delay": 0.01})
    text = " ".join(f"token{i}" for i in range(80))
    async with live.client() as a, live.client() as b:
        s = await a.mutation("session.create", {})
        early = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": text})
        await early.until_type("text-delta", 20)
        late = await subscribe(b, s["id"], "0")
        snapshot = await late.until(lambda e: e["type"] == "stream-snapshot")
        await late.until(lambda e: e["type"] == "message-completed" and e["message"]["role"] == "assistant")
    lines = [r.getMessage() for r in caplog.records if r.name == "server.sync.delivery"]
    what = f": stream-snapshot of message {snapshot['messageId']} to offset {snapshot['offset']} at seq "
    sent = [line for line in lines if what in line]
    assert len(sent) == 1
    who = sent[0].split(": stream-snapshot")[0]  # "session S subscriber ID (alice over ws)"
    assert who.startswith(f"session {s['id']} subscriber ")
    assert any(line.startswith(who + ": caught up from seq 0 to ") for line in lines)


async def test_a_snapshot_that_takes_a_while_to_read_still_comes_after_its_message(server_factory, sqlite_url):
    """With several replicas a snapshot is read from the shared stream buffer, a round trip during which an answer
    can start: its ``message-created`` must still reach the subscriber before the snapshot of its text, or a
    client that drops a snapshot of a message it does not hold shows none of the answer until it completes."""
    live = await server_factory(sqlite_url, **{**FAST, "echo_delay": 0.01})
    logs = live.services.event_logs
    shared = logs.snapshots
    answer_streams = asyncio.Event()

    async def round_trip(session_id: str) -> list[dict[str, Any]]:
        await answer_streams.wait()
        return await shared(session_id)

    text = " ".join(f"token{i}" for i in range(60))
    async with live.client() as a, live.client() as b:
        s = await a.mutation("session.create", {})
        early = await subscribe(a, s["id"])
        logs.snapshots = round_trip  # for the next subscription only
        late = await subscribe(b, s["id"], None)  # its catch-up reads nothing, then waits for the snapshot
        logs.snapshots = shared
        await a.mutation("message.send", {"sessionId": s["id"], "content": text})
        await early.until_type("text-delta", 5)
        answer_streams.set()
        completed = await late.until(lambda e: e["type"] == "message-completed" and e["message"]["role"] == "assistant")
    mid = completed["message"]["id"]
    seen = [e["type"] for e in late.events if mid in (e.get("messageId"), e.get("message", {}).get("id"))]
    assert "stream-snapshot" in seen
    assert seen.index("message-created") < seen.index("stream-snapshot"), seen[:4]
    assert late.text_of(mid) == text


async def test_no_snapshot_of_an_answer_that_completed_while_the_subscriber_caught_up(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, **{**FAST, "echo_delay": 0.01})
    logs = live.services.event_logs
    shared = logs.snapshots
    taken: list[list[dict[str, Any]]] = []
    answer_done = asyncio.Event()

    async def read_then_wait(session_id: str) -> list[dict[str, Any]]:
        snapshots = await shared(session_id)
        taken.append(snapshots)
        await answer_done.wait()  # the answer completes between this read and the log read after it
        return snapshots

    text = " ".join(f"token{i}" for i in range(300))
    async with live.client() as a, live.client() as b:
        s = await a.mutation("session.create", {})
        early = await subscribe(a, s["id"])
        await a.mutation("message.send", {"sessionId": s["id"], "content": text})
        await early.until_type("text-delta", 5)
        logs.snapshots = read_then_wait
        late = await subscribe(b, s["id"], None)
        logs.snapshots = shared
        completed = await early.until(
            lambda e: e["type"] == "message-completed" and e["message"]["role"] == "assistant", 30
        )
        answer_done.set()
        mid = completed["message"]["id"]
        # Whatever the catch-up sent comes before a later change.
        await a.mutation("session.setTitle", {"sessionId": s["id"], "title": "after"})
        await late.until(lambda e: e["type"] == "title-changed" and e["title"] == "after")
    assert [snap["messageId"] for snap in taken[0]] == [mid]  # read while the answer streamed
    # Its final text came in the log read; a snapshot after it would set a client's text back to a partial one.
    assert late.of("stream-snapshot") == []
    assert [e["message"]["content"] for e in late.of("message-completed") if e["message"]["id"] == mid] == [text]
    assert late.of("text-delta") == [] and late.text_of(mid) == text  # what it shows: the final text, once


async def test_session_get_mid_stream_shows_the_partial_text(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, **{**FAST, "echo_delay": 0.01})
    text = " ".join(f"t{i}" for i in range(100))
    async with live.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        res = await c.mutation("message.send", {"sessionId": s["id"], "content": text})
        await st.until_type("text-delta", 20)
        snap = await c.query("session.get", {"sessionId": s["id"]})
        run = snap["run"]
        assert run["id"] == res["runId"] and run["status"] == "running"
        assert run["pendingToolCalls"] == [] and run["pendingApprovals"] == []
        streaming = run["streaming"]
        assert streaming["offset"] == len(streaming["text"]) >= 20 * 2
        assert text.startswith(streaming["text"])
        assert snap["messages"][-1]["id"] == streaming["messageId"]
        assert snap["messages"][-1]["status"] == "streaming"
        await st.until(lambda e: e["type"] == "run-finished")


async def test_partial_text_is_flushed_to_the_row_while_streaming(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, **{**FAST, "echo_delay": 0.01, "stream_flush_seconds": 0.1})
    text = " ".join(f"t{i}" for i in range(150))
    async with live.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": text})
        await st.until_type("text-delta", 60)
        page = await c.query("message.list", {"sessionId": s["id"]})
        row = page["items"][-1]
        assert row["status"] == "streaming" and len(row["content"]) > 0 and text.startswith(row["content"])
        await st.until(lambda e: e["type"] == "run-finished")


async def test_disable_streaming_sends_one_delta_per_step(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {"disableStreaming": True})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": WORDS})
        await st.until(lambda e: e["type"] == "run-finished")
        deltas = st.of("text-delta")
        assert [(d["offset"], d["delta"]) for d in deltas] == [(0, WORDS)]


async def test_add_instructions_appends_system_messages_then_answers(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        await c.mutation("message.send", {"sessionId": s["id"], "content": "first question"})
        await idle(c, s["id"])
        res = await c.mutation(
            "message.addInstructions", {"sessionId": s["id"], "instructions": ["be brief", "use French"]}
        )
        assert [m["role"] for m in res["messages"]] == ["system", "system"] and res["runId"]
        snap = await idle(c, s["id"])
        assert [(m["role"], m["content"]) for m in snap["messages"]] == [
            ("user", "first question"),
            ("assistant", "first question"),
            ("system", "be brief"),
            ("system", "use French"),
            ("assistant", "first question"),
        ]
        quiet = await c.mutation(
            "message.addInstructions", {"sessionId": s["id"], "instructions": "no answer", "respond": False}
        )
        assert quiet["runId"] is None
        snap = await c.query("session.get", {"sessionId": s["id"]})
        assert snap["messages"][-1]["content"] == "no answer" and snap["run"] is None


async def test_send_with_instructions_appends_them_first(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        await c.mutation("message.send", {"sessionId": s["id"], "content": "hi", "instructions": "stay formal"})
        snap = await idle(c, s["id"])
        assert [(m["role"], m["content"]) for m in snap["messages"]] == [
            ("system", "stay formal"),
            ("user", "hi"),
            ("assistant", "hi"),
        ]


async def test_provider_error_fails_the_run_and_keeps_the_partial_answer(engine):
    async with engine.client() as c:
        s = await c.mutation("session.create", {})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": "a b c d e\n/fail after=3 boom"})
        failed = await st.until(lambda e: e["type"] == "run-failed")
        assert failed["error"] == {"code": "echo_failure", "message": "boom", "retryable": False}
        snap = await idle(c, s["id"])
        answer = snap["messages"][-1]
        assert answer["status"] == "error" and answer["content"] == "a b c" and answer["finishReason"] == "error"
        assert snap["session"]["queuePaused"] is True


async def test_unconfigured_provider_fails_the_run_cleanly(engine):
    """A provider without credentials (no ANTHROPIC_API_KEY in the tests' environment) fails the run, not
    the server. (An unknown provider id is refused by session.create itself.)"""
    async with engine.client() as c:
        s = await c.mutation("session.create", {"provider": "anthropic", "model": "any"})
        st = await subscribe(c, s["id"])
        await c.mutation("message.send", {"sessionId": s["id"], "content": "hi"})
        failed = await st.until(lambda e: e["type"] == "run-failed")
        assert failed["error"]["code"] == "not_configured"
        await idle(c, s["id"])


async def test_bad_input_is_rejected_and_changes_nothing(engine):
    from chatsync_client import TrpcError

    async with engine.client() as c, engine.client("bob") as bob:
        s = await c.mutation("session.create", {})
        for bad in (
            {"sessionId": s["id"]},
            {"sessionId": s["id"], "content": "x", "busyPolicy": "later"},
            {"sessionId": s["id"], "content": "x", "extra": 1},
        ):
            try:
                await c.mutation("message.send", bad)
                raise AssertionError("accepted")
            except TrpcError as exc:
                assert exc.code == "BAD_REQUEST"
        for path, inp in (
            ("message.send", {"sessionId": s["id"], "content": "x"}),
            ("run.abort", {"sessionId": s["id"]}),
            ("tool.approve", {"sessionId": s["id"], "callId": "c", "approved": True}),
        ):
            try:
                await bob.mutation(path, inp)
                raise AssertionError("someone else's session")
            except TrpcError as exc:
                assert exc.code == "NOT_FOUND"
        # A write after the refusals is the session's first event: none of them wrote anything, before its
        # answer or after it (the write waits for the session's lock, so it comes after anything they began).
        await c.mutation("session.setTitle", {"sessionId": s["id"], "title": "after the refusals"})
        snap = await c.query("session.get", {"sessionId": s["id"]})
        assert snap["messages"] == [] and snap["lastEventId"] == "1"
