"""MCP tools on two replicas (PostgreSQL + Redis), each with its own MCP sessions: a run started on replica A
whose `ask` call is approved by clients of replica B — both devices of B answering at once — makes the call
exactly once, and every client on either replica sees the one result."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from scenario_kit import open_clients

SCRIPT = Path(__file__).resolve().parent.parent / "engine" / "mcp_test_server.py"


async def test_a_call_approved_on_the_other_replica_is_made_once(cluster_factory, tmp_path):
    calls = tmp_path / "calls.log"
    config = tmp_path / "mcp.json"
    server = {"command": [sys.executable, str(SCRIPT)], "env": {"MCP_TEST_LOG": str(calls)}, "approval": "ask"}
    config.write_text(json.dumps({"servers": {"askme": server}}))
    cluster = await cluster_factory(
        2, CHATSYNC_ECHO_DELAY="0.002", CHATSYNC_SWEEP_SECONDS="0.5", CHATSYNC_MCP_SERVERS=str(config)
    )
    a, b1, _a2, b2 = await open_clients(cluster, 4)  # a on replica A; b1, b2 on replica B
    try:
        s = await a.mutation("session.create", {"mcpServers": ["askme"]})
        sid = s["id"]
        subs = {
            name: await c.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
            for name, c in (("a", a), ("b1", b1))
        }
        await a.mutation("message.send", {"sessionId": sid, "content": '/tool askme__text {"text": "once"}'})
        asked = None
        async with asyncio.timeout(60):
            async for _id, e in subs["b1"]:
                if e["type"] == "tool-approval-requested":
                    asked = e["callId"]
                    break
        answers = await asyncio.gather(
            *(c.mutation("tool.approve", {"sessionId": sid, "callId": asked, "approved": True}) for c in (b1, b2)),
            return_exceptions=True,
        )
        assert sum(1 for r in answers if isinstance(r, dict) and r.get("resolved")) == 1  # the first decision wins
        results = {}
        for name, sub in subs.items():
            async with asyncio.timeout(60):
                async for _id, e in sub:
                    if e["type"] == "tool-call-result":
                        results[name] = e
                    if e["type"] == "run-finished":
                        break
        assert results["a"]["output"] == results["b1"]["output"] == "echo: once"
        snap = await a.query("session.get", {"sessionId": sid})
        assert [m["content"] for m in snap["messages"] if m["role"] == "tool"] == ["echo: once"]
        assert [line.split()[0] for line in calls.read_text().splitlines()] == ["text"]  # made exactly once
    finally:
        for c in (a, b1, _a2, b2):
            await c.close()
