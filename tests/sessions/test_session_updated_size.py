"""``session-updated`` carries the large fields of a session (tools, system prompt, defaults, metadata) only
when they changed: a status change on a session with large tool definitions stays small, and a client
that merges the events ends equal to ``session.get``."""

from __future__ import annotations

import asyncio

import orjson

from chatsync_client import ChatClient


async def test_status_changes_do_not_carry_the_tools(server_factory, sqlite_url):
    live = await server_factory(sqlite_url, users=("alice",), echo_delay=0.001)
    tools = [
        {
            "name": f"tool_{i}",
            "description": "d" * 3000,
            "parameters": {"type": "object", "properties": {f"p{j}": {"type": "string"} for j in range(20)}},
        }
        for i in range(64)
    ]
    async with live.client("alice") as c:
        s = await c.mutation("session.create", {"tools": tools, "systemPrompt": "s" * 50_000})
        sid = s["id"]
        sub = await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        await c.mutation("message.send", {"sessionId": sid, "content": "hello there"})
        updates = []
        while len(updates) < 2:  # running, then idle
            _id, e = await sub.next(10)
            if e["type"] == "session-updated":
                updates.append(e)
        assert [u["session"]["status"] for u in updates] == ["running", "idle"]
        for u in updates:
            assert len(orjson.dumps(u)) < 2000 and "tools" not in u["session"] and "systemPrompt" not in u["session"]
        await c.mutation("session.update", {"sessionId": sid, "tools": tools[:1]})
        while True:
            _id, e = await sub.next(10)
            if e["type"] == "session-updated":
                break
        assert [t["name"] for t in e["session"]["tools"]] == ["tool_0"] and "systemPrompt" not in e["session"]
        await sub.close()

    # a client that merges (the Python SessionView) ends equal to session.get
    async with ChatClient(live.url, live.tokens["alice"]) as chat:
        view = await chat.open_session(sid)
        try:
            await chat.trpc.mutation("session.update", {"sessionId": sid, "model": "echo", "busyPolicy": "steer"})
            await chat.trpc.mutation("message.send", {"sessionId": sid, "content": "again"})

            async def settled() -> bool:
                snap = await chat.trpc.query("session.get", {"sessionId": sid})
                return snap["session"]["status"] == "idle" and view.last_event_id == snap["lastEventId"]

            while not await settled():
                await asyncio.sleep(0.02)
            snap = await chat.trpc.query("session.get", {"sessionId": sid})
            assert view.session is not None
            # lastSeq and updatedAt move with every event, and only events that carry the session say so
            moving = ("lastSeq", "updatedAt")
            mine = {k: v for k, v in view.session.wire().items() if k not in moving}
            assert mine == {k: v for k, v in snap["session"].items() if k not in moving}
            assert mine["tools"][0]["name"] == "tool_0" and len(mine["systemPrompt"]) == 50_000
        finally:
            await view.close()
