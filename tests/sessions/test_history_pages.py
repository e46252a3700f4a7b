"""``session.get`` returns a long history's newest messages only, with the cursor ``message.list`` reads the
rest from: every message exactly once, in order, over the pages. Bounds: ``messageLimit`` and ``limit`` 1-500."""

from __future__ import annotations

import pytest

from chatsync_client.trpc import TrpcError


async def _history(c, sid: str, count: int) -> None:
    """``count`` system messages (64 per call, without starting the model)."""
    for start in range(0, count, 64):
        n = min(64, count - start)
        await c.mutation(
            "message.addInstructions",
            {"sessionId": sid, "instructions": [f"note {start + i}" for i in range(n)], "respond": False},
        )


async def test_session_get_pages_a_long_history(db_url, server_factory):
    live = await server_factory(db_url, users=("alice", "bob"))
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        await _history(c, sid, 450)

        snap = await c.query("session.get", {"sessionId": sid})
        assert [m["content"] for m in snap["messages"]] == [f"note {i}" for i in range(250, 450)]
        assert snap["messagesBefore"] is not None

        older, before = [], snap["messagesBefore"]
        while before is not None:  # pages of 100, back to the start
            page = await c.query("message.list", {"sessionId": sid, "before": before, "limit": 100})
            older[:0] = page["items"]
            before = page["nextCursor"]
        assert [m["content"] for m in older + snap["messages"]] == [f"note {i}" for i in range(450)]

        small = await c.query("session.get", {"sessionId": sid, "messageLimit": 1})
        assert [m["content"] for m in small["messages"]] == ["note 449"]
        page = await c.query("message.list", {"sessionId": sid, "before": small["messagesBefore"], "limit": 500})
        assert len(page["items"]) == 449 and page["nextCursor"] is None

        whole = await c.query("session.get", {"sessionId": sid, "messageLimit": 500})
        assert len(whole["messages"]) == 450 and whole["messagesBefore"] is None

        for bad in (0, 501, "many"):
            with pytest.raises(TrpcError) as err:
                await c.query("session.get", {"sessionId": sid, "messageLimit": bad})
            assert err.value.code == "BAD_REQUEST"
        with pytest.raises(TrpcError) as err:
            await c.query("message.list", {"sessionId": sid, "limit": 501})
        assert err.value.code == "BAD_REQUEST"

    async with live.client("bob") as c:  # another user's session stays hidden, whatever the page
        with pytest.raises(TrpcError) as err:
            await c.query("message.list", {"sessionId": sid, "before": snap["messagesBefore"]})
        assert err.value.code == "NOT_FOUND"


async def test_a_short_history_comes_whole(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",))
    async with live.client("alice") as c:
        sid = (await c.mutation("session.create", {}))["id"]
        await _history(c, sid, 200)
        snap = await c.query("session.get", {"sessionId": sid})
        assert len(snap["messages"]) == 200 and snap["messagesBefore"] is None
