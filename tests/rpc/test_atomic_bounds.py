"""Per-user bounds hold under concurrency, over real sockets, on SQLite and PostgreSQL: many calls that would pass
a bound together are answered at once, and exactly as many as the bound allows succeed; the rest get the
documented error and leave nothing behind (docs/api.md "Limits")."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from concurrent_calls import all_at_once, codes

from chatsync_client import TrpcError
from server.store import repo
from server.store.models import utcnow

# An answer of the echo model that streams for minutes at 0.05 s a word: a run that stays in progress until the
# test aborts it.
LONG = " ".join(f"w{i}" for i in range(4000))


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.05)


async def test_concurrent_creates_stop_exactly_at_the_session_limit(db_url, server_factory):
    live = await server_factory(db_url, max_sessions_per_user=5, db_pool_timeout_seconds=60)
    calls = [(live.url, live.tokens["alice"], "session.create", {"title": f"s{i}"}) for i in range(50)]
    answers = await all_at_once(calls)
    assert codes(answers) == {None: 5, "PRECONDITION_FAILED": 45}
    async with live.client("alice") as c, live.client("bob") as bob:
        listed = (await c.query("session.list", {}))["items"]
        assert sorted(s["id"] for s in listed) == sorted(a.data["id"] for a in answers if a.ok)
        await bob.mutation("session.create", {})  # the bound is per user
        await c.mutation("session.delete", {"sessionId": listed[0]["id"]})
        await c.mutation("session.create", {})  # a deleted session makes room


async def test_copies_of_one_create_at_the_limit_all_answer_with_its_session(db_url, server_factory):
    """The copies of a create repeated with its clientRequestId queue on the user lock behind the first: the
    first takes the last place, and each copy answers with its session, not with the limit it reached."""
    live = await server_factory(db_url, users=("alice",), max_sessions_per_user=1, db_pool_timeout_seconds=60)
    inp = {"clientRequestId": "the-one-create", "title": "once"}
    answers = await all_at_once([(live.url, live.tokens["alice"], "session.create", inp)] * 20)
    assert codes(answers) == {None: 20}
    assert len({a.data["id"] for a in answers}) == 1
    async with live.client("alice") as c:
        assert len((await c.query("session.list", {}))["items"]) == 1


async def test_concurrent_enqueues_and_sends_stop_exactly_at_the_queue_limit(db_url, server_factory):
    """While a run is in progress, ``message.enqueueMessage`` and ``message.send`` (busy policy ``enqueue``) both
    add to the queue under the session's lock: 50 at once against a limit of 5 queue exactly 5."""
    live = await server_factory(
        db_url, users=("alice",), max_queue_length=5, echo_delay=0.05, db_pool_timeout_seconds=60
    )
    token = live.tokens["alice"]
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        assert (await c.mutation("message.send", {"sessionId": sid, "content": LONG}))["status"] == "started"
        calls = [(live.url, token, "message.enqueueMessage", {"sessionId": sid, "content": f"e{i}"}) for i in range(25)]
        calls += [(live.url, token, "message.send", {"sessionId": sid, "content": f"s{i}"}) for i in range(25)]
        answers = await all_at_once(calls)
        assert codes(answers) == {None: 5, "PRECONDITION_FAILED": 45}
        accepted = sorted(call[3]["content"] for call, a in zip(calls, answers) if a.ok)
        queued = await c.query("message.getQueuedMessages", {"sessionId": sid})
        assert sorted(q["content"] for q in queued) == accepted
        sends = [a for call, a in zip(calls, answers) if a.ok and call[2] == "message.send"]
        assert all(a.data["status"] == "queued" for a in sends)
        await c.mutation("run.abort", {"sessionId": sid})


async def test_concurrent_sends_stop_exactly_at_the_active_run_cap(db_url, server_factory):
    """20 sends to 20 idle sessions at once against a cap of 3 runs in progress: 3 start, 17 are refused with
    nothing stored. A message queued meanwhile waits in its queue (never lost, never sent twice) and goes once a
    run of the user ends."""
    live = await server_factory(
        db_url, max_active_runs_per_user=3, echo_delay=0.05, sweep_seconds=0.2, db_pool_timeout_seconds=60
    )
    token = live.tokens["alice"]
    async with live.client("alice") as c, live.client("bob") as bob:
        sids = [(await c.mutation("session.create", {}))["id"] for _ in range(20)]
        sends = [(live.url, token, "message.send", {"sessionId": s, "content": LONG}) for s in sids]
        answers = await all_at_once(sends)
        assert codes(answers) == {None: 3, "TOO_MANY_REQUESTS": 17}
        running = [s for s, a in zip(sids, answers) if a.ok]
        refused = [s for s, a in zip(sids, answers) if not a.ok]
        for sid in refused:
            snap = await c.query("session.get", {"sessionId": sid})
            assert snap["messages"] == [] and snap["run"] is None and snap["session"]["status"] == "idle"

        # At the cap, what would start a run is refused and changes nothing ...
        waiting = refused[0]
        with pytest.raises(TrpcError) as err:
            await c.mutation("message.addInstructions", {"sessionId": waiting, "instructions": ["be brief"]})
        assert err.value.code == "TOO_MANY_REQUESTS"
        # ... but a queued message is kept: it waits in its queue for a free slot.
        item = await c.mutation("message.enqueueMessage", {"sessionId": waiting, "content": "when there is room"})
        with pytest.raises(TrpcError) as err:
            await c.mutation("message.sendQueuedNow", {"sessionId": waiting, "messageId": item["id"], "mode": "next"})
        assert err.value.code == "TOO_MANY_REQUESTS"
        assert (await c.mutation("message.resumeQueue", {"sessionId": waiting}))["runId"] is None
        snap = await c.query("session.get", {"sessionId": waiting})
        assert snap["messages"] == [] and snap["run"] is None and [q["id"] for q in snap["queue"]] == [item["id"]]
        async with live.services.db.read() as s:  # the sweeper does not spend its rounds on it either
            assert waiting not in await repo.sessions_needing_work(s, utcnow(), max_active_runs=3)

        bsid = (await bob.mutation("session.create", {}))["id"]  # the cap is per user
        assert (await bob.mutation("message.send", {"sessionId": bsid, "content": "hi"}))["status"] == "started"

        await c.mutation("run.abort", {"sessionId": running[0]})

        async def sent() -> bool:
            snap = await c.query("session.get", {"sessionId": waiting})
            return not snap["queue"] and any(m["role"] == "assistant" for m in snap["messages"])

        await until(sent)
        snap = await c.query("session.get", {"sessionId": waiting})
        assert [m["content"] for m in snap["messages"] if m["role"] == "user"] == ["when there is room"]
        for sid in running[1:]:
            await c.mutation("run.abort", {"sessionId": sid})
