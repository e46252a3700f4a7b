"""session.feed: a live list of the caller's sessions, resumable, and nobody else's."""

from __future__ import annotations

from typing import Any

from chatsync_client import TrpcClient
from server.store import eventlog


async def take(sub, n: int) -> list[tuple[str | None, dict[str, Any]]]:
    return [await sub.next(30) for _ in range(n)]  # generous: a loaded CI host reconnects slowly


async def test_changes_reach_the_other_device_in_order(md):
    async with md.client("alice") as laptop, md.client("alice") as phone, md.client("bob") as bob:
        listed = await phone.query("session.list", {})
        assert listed["items"] == [] and listed["feedEventId"] == "0"
        sub = await phone.subscribe("session.feed", {"lastEventId": listed["feedEventId"]})
        bob_sub = await bob.subscribe("session.feed", {})
        await bob_sub.wait_started()  # "from now" is fixed when it starts: bob's changes come after
        s = await laptop.mutation("session.create", {"title": "plans", "queuePaused": True})
        await laptop.mutation("session.setTitle", {"sessionId": s["id"], "title": "trip plans"})
        await laptop.mutation("message.enqueueMessage", {"sessionId": s["id"], "content": "first"})
        await laptop.mutation("message.resumeQueue", {"sessionId": s["id"]})
        got = await take(sub, 4)
        ids = [int(i) for i, _e in got]
        assert ids == [1, 2, 3, 4]
        created, titled, queued, resumed = (e for _i, e in got)
        assert created["type"] == "session-created" and created["session"]["title"] == "plans"
        assert titled["session"]["title"] == "trip plans"
        assert queued["session"]["queueLength"] == 1
        # resuming sent the queued message in the same transaction: the run has started, the queue is empty
        assert resumed["type"] == "session-updated" and resumed["session"]["status"] == "running"
        assert resumed["session"]["queueLength"] == 0 and not resumed["session"]["queuePaused"]
        while True:  # the run ends: idle again; then the session goes
            _i, e = await sub.next(10)
            if e["session"]["status"] == "idle":
                break
        await laptop.mutation("session.delete", {"sessionId": s["id"]})
        while True:
            _i, e = await sub.next(10)
            if e["type"] == "session-deleted":
                assert e["sessionId"] == s["id"]
                break
        mine = await bob.mutation("session.create", {"title": "bob's"})
        _i, e = await bob_sub.next(10)
        assert e["type"] == "session-created" and e["session"]["id"] == mine["id"]  # nothing of alice's before it
        await sub.close()
        await bob_sub.close()


async def test_resume_gives_exactly_the_missed_changes(md):
    async with md.client("alice") as laptop:
        phone = TrpcClient(md.url, md.tokens["alice"])
        await phone.connect()
        sub = await phone.subscribe("session.feed", {})
        await sub.wait_started()  # "from now" is fixed when it starts: the laptop's change must come after it
        s = await laptop.mutation("session.create", {"title": "a"})
        first_id, _e = await sub.next(10)
        await phone.drop_connection()  # the socket dies; the client resubscribes with its last id
        for title in ("b", "c", "d"):
            await laptop.mutation("session.setTitle", {"sessionId": s["id"], "title": title})
        got = await take(sub, 3)
        assert [int(i) for i, _e in got] == [int(first_id) + 1, int(first_id) + 2, int(first_id) + 3]
        assert [e["session"]["title"] for _i, e in got] == ["b", "c", "d"]
        await sub.close()
        await phone.close()


async def test_a_position_too_old_or_from_the_future_gets_resync_required(server_factory, sqlite_url, monkeypatch):
    monkeypatch.setattr(eventlog, "FEED_RETENTION", 5)
    monkeypatch.setattr(eventlog, "TRIM_EVERY", 2)
    live = await server_factory(sqlite_url, users=("alice",))
    async with live.client("alice") as c:
        s = await c.mutation("session.create", {})
        for i in range(12):
            await c.mutation("session.setTitle", {"sessionId": s["id"], "title": f"t{i}"})
        for stale in ("1", "999"):
            sub = await c.subscribe("session.feed", {"lastEventId": stale})
            item_id, event = await sub.next(10)
            assert item_id is None and event["type"] == "resync-required"
            await sub.close()
        listed = await c.query("session.list", {})
        assert listed["feedEventId"] == "13"
        assert listed["items"][0]["title"] == "t11" and listed["items"][0]["queueLength"] == 0
