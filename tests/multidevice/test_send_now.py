"""message.sendQueuedNow: interrupt (default), steer and next, watched by a second client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chatsync_client import TrpcError

LONG = " ".join(f"w{i}" for i in range(1500))  # the echo model answers word by word: long enough to press


async def until(sub, pred, events: list[dict[str, Any]], timeout: float = 15) -> dict[str, Any]:
    for e in events:
        if pred(e):
            return e
    while True:
        _id, e = await sub.next(timeout)
        events.append(e)
        if pred(e):
            return e


def runs(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(runId, user text) for every run, in order, from the events alone."""
    users: dict[str, str] = {}
    out = []
    for e in events:
        if e["type"] == "message-created" and e["message"]["role"] == "user":
            users[e["message"]["runId"]] = e["message"]["content"]
        if e["type"] == "run-started":
            out.append((e["runId"], users.get(e["runId"], "")))
    return out


async def until_idle_after_runs(sub, events: list[dict[str, Any]], n: int, timeout: float) -> None:
    """Read until the session is idle again with ``n`` runs started in all."""
    await until(
        sub,
        lambda e: e["type"] == "session-updated" and e["session"]["status"] == "idle" and len(runs(events)) == n,
        events,
        timeout,
    )


@pytest.fixture
async def busy(db_url, server_factory):
    """A session answering a long message, with three messages queued by a first client; a second client
    watches from the start."""
    live = await server_factory(db_url, users=("alice",), echo_delay=0.002, sweep_seconds=0.2)
    a = live.client("alice")
    b = live.client("alice")
    await a.connect()
    await b.connect()
    sid = (await a.mutation("session.create", {}))["id"]
    watch = await b.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
    await a.mutation("message.send", {"sessionId": sid, "content": LONG})
    events: list[dict[str, Any]] = []
    await until(watch, lambda e: e["type"] == "text-delta", events)
    queued = [await a.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"q{i}"}) for i in range(3)]
    yield live, a, b, sid, watch, events, queued
    await watch.close()
    await a.close()
    await b.close()


async def test_interrupt_sends_that_item_next_then_the_rest_in_order(busy):
    _live, a, b, sid, watch, events, queued = busy
    reply = await b.mutation("message.sendQueuedNow", {"sessionId": sid, "messageId": queued[1]["id"]})
    assert reply["status"] == "interrupting"
    await until_idle_after_runs(watch, events, 4, 30)
    assert [text for _r, text in runs(events)] == [LONG, "q1", "q0", "q2"]
    assert len([e for e in events if e["type"] == "run-aborted"]) == 1
    assert not [e for e in events if e["type"] == "queue-paused"]  # this abort does not pause the queue
    first = next(e for e in events if e["type"] == "message-completed" and e["message"]["role"] == "assistant")
    assert first["message"]["status"] == "interrupted" and first["message"]["content"]  # partial answer kept
    sent = [e["messageId"] for e in events if e["type"] == "queue-message-removed"]
    assert sent == [queued[1]["id"], queued[0]["id"], queued[2]["id"]]
    assert await a.query("message.getQueuedMessages", {"sessionId": sid}) == []


async def test_two_devices_pressing_at_once_get_one_run_after_the_other(busy):
    _live, a, b, sid, watch, events, queued = busy
    await asyncio.gather(
        a.mutation("message.sendQueuedNow", {"sessionId": sid, "messageId": queued[0]["id"]}),
        b.mutation("message.sendQueuedNow", {"sessionId": sid, "messageId": queued[2]["id"]}),
    )
    await until_idle_after_runs(watch, events, 4, 30)
    texts = [text for _r, text in runs(events)]
    assert texts[0] == LONG and sorted(texts[1:3]) == ["q0", "q2"] and texts[3] == "q1"
    # never two at once: every run-started follows the previous run's end
    open_runs = 0
    for e in events:
        if e["type"] == "run-started":
            open_runs += 1
            assert open_runs == 1
        elif e["type"] in ("run-finished", "run-aborted", "run-failed"):
            open_runs -= 1


async def test_steer_joins_the_running_answer(busy):
    _live, a, b, sid, watch, events, queued = busy
    reply = await b.mutation("message.sendQueuedNow", {"sessionId": sid, "messageId": queued[2]["id"], "mode": "steer"})
    assert reply["status"] == "steered"
    run_id = reply["runId"]
    steered = await until(watch, lambda e: e["type"] == "message-created" and e["message"]["content"] == "q2", events)
    assert steered["message"]["runId"] == run_id
    assert [q["content"] for q in await a.query("message.getQueuedMessages", {"sessionId": sid})] == ["q0", "q1"]
    await until_idle_after_runs(watch, events, 3, 60)
    assert [text for _r, text in runs(events)] == [LONG, "q0", "q1"]
    assert not [e for e in events if e["type"] == "run-aborted"]


async def test_next_moves_it_to_the_head_without_stopping_the_answer(busy):
    _live, _a, b, sid, watch, events, queued = busy
    reply = await b.mutation("message.sendQueuedNow", {"sessionId": sid, "messageId": queued[2]["id"], "mode": "next"})
    assert reply["status"] == "next"
    reordered = await until(watch, lambda e: e["type"] == "queue-reordered", events)
    assert reordered["order"] == [queued[2]["id"], queued[0]["id"], queued[1]["id"]]
    await until_idle_after_runs(watch, events, 4, 60)
    assert [text for _r, text in runs(events)] == [LONG, "q2", "q0", "q1"]
    assert not [e for e in events if e["type"] == "run-aborted"]


async def test_on_an_idle_session_it_is_sent_at_once_and_unknown_items_are_not_found(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",), echo_delay=0.001)
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {"queuePaused": True}))["id"]
        q = [await c.mutation("message.enqueueMessage", {"sessionId": sid, "content": f"q{i}"}) for i in range(2)]
        with pytest.raises(TrpcError) as err:
            await c.mutation("message.sendQueuedNow", {"sessionId": sid, "messageId": "queue-nope"})
        assert err.value.code == "NOT_FOUND"
        reply = await c.mutation("message.sendQueuedNow", {"sessionId": sid, "messageId": q[1]["id"], "mode": "next"})
        assert reply["status"] == "started" and reply["runId"]
        snap = await c.query("session.get", {"sessionId": sid})
        assert next(m["content"] for m in snap["messages"] if m["role"] == "user") == "q1"
