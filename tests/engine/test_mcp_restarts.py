"""MCP calls across restarts of a real `chatsync serve`: an `ask` call still waits for its approval after the
server was killed (and runs once approved), and a server killed during a call leaves a history every provider
takes (the call is answered as cancelled on recovery) and MCP tools that work after the restart."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from engine_helpers import idle, subscribe, wait_for
from mcp_kit import log_lines, stdio, write_config
from servers import ServerProcess
from test_llm_convert_properties import check_anthropic, check_google, check_openai

from chatsync_client import TrpcClient
from server.engine.history import build_request
from server.llm.convert import OPENAI, to_anthropic_request, to_google_request, to_openai_request
from server.store.models import ChatSession, Message


def _stored(db: Path, session_id: str) -> tuple[ChatSession, list[Message]]:
    """The session's row and messages as stored, read without the server (it may be down)."""
    with closing(sqlite3.connect(db)) as con:
        con.row_factory = sqlite3.Row
        srow = con.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        mrows = con.execute("SELECT * FROM messages WHERE session_id = ? ORDER BY ordinal", (session_id,)).fetchall()

    def js(value):
        return json.loads(value) if isinstance(value, str) else value

    session = ChatSession(
        id=srow["id"], provider="openai", model="gpt-test", system_prompt=None, defaults={}, tools=js(srow["tools"])
    )
    messages = [
        Message(
            id=m["id"],
            role=m["role"],
            content=m["content"],
            status=m["status"],
            attachments=js(m["attachments"]) or [],
            tool_calls=js(m["tool_calls"]),
            tool_call_id=m["tool_call_id"],
            is_error=bool(m["is_error"]),
        )
        for m in mrows
    ]
    return session, messages


async def test_restarts_keep_approvals_pending_and_histories_valid(tmp_path: Path) -> None:
    calls = tmp_path / "calls.log"
    config = write_config(
        tmp_path / "mcp.json", {"local": stdio(calls, approval="auto"), "askme": stdio(calls, approval="ask")}
    )
    db = tmp_path / "mcp.db"
    server = ServerProcess(
        tmp_path,
        database_url=f"sqlite+aiosqlite:///{db}",
        users=("erin",),
        ECHO_DELAY="0.001",
        RUN_LEASE_SECONDS="1",
        SWEEP_SECONDS="0.2",
        MCP_SERVERS=config,
    )
    token = server.tokens["erin"]
    url = server.url
    server.start()
    try:
        await server.ready()
        async with TrpcClient(url, token, reconnect=False) as c:
            sid = (await c.mutation("session.create", {"mcpServers": ["local", "askme"]}))["id"]
            st = await subscribe(c, sid)
            await c.mutation("message.send", {"sessionId": sid, "content": '/tool askme__text {"text": "later"}'})
            asked = await st.until(lambda e: e["type"] == "tool-approval-requested")
            await st.until(lambda e: e["type"] == "session-updated" and e["session"]["status"] == "requires-action")
        server.kill()
        server.start()
        await server.ready()
        async with TrpcClient(url, token) as c:
            snap = await c.query("session.get", {"sessionId": sid})
            assert snap["session"]["status"] == "requires-action"
            pending = snap["run"]["pendingToolCalls"]
            assert [(p["callId"], p["approval"]) for p in pending] == [(asked["callId"], "pending")]
            assert log_lines(calls) == []  # nothing ran while it waited
            st = await subscribe(c, sid)
            await c.mutation("tool.approve", {"sessionId": sid, "callId": asked["callId"], "approved": True})
            await st.until(lambda e: e["type"] == "tool-call-result" and e["callId"] == asked["callId"])
            await idle(c, sid)
            assert [line[0] for line in log_lines(calls)] == ["text"]
            # Killed during a call.
            await c.mutation("message.send", {"sessionId": sid, "content": '/tool local__sleep {"seconds": 60}'})
            await wait_for(lambda: _logged(calls, "sleep"), timeout=30)
        server.kill()
        session, rows = _stored(db, sid)
        request = build_request(session, rows)
        check_openai(to_openai_request(request, OPENAI)["messages"], compatible=False, mistral_ids=False)
        check_anthropic(to_anthropic_request(request))
        check_google(to_google_request(request))
        server.start()
        await server.ready()
        async with TrpcClient(url, token) as c:
            snap = await idle(c, sid, timeout=30)  # recovered: the run failed as interrupted
            assert snap["session"]["queuePaused"] is True
            sleep_call = next(
                c for m in snap["messages"] for c in m.get("toolCalls") or () if c["name"] == "local__sleep"
            )
            [answered] = [m for m in snap["messages"] if m.get("toolCallId") == sleep_call["id"]]
            assert answered["outcome"] == "cancelled"  # closed on recovery, as any call of a stopped run
            st = await subscribe(c, sid, last_event_id=None)
            await c.mutation("message.send", {"sessionId": sid, "content": '/tool local__text {"text": "back"}'})
            result = await st.until(lambda e: e["type"] == "tool-call-result", timeout=30)
            assert result["output"] == "echo: back" and result["isError"] is False
            await st.until(lambda e: e["type"] == "run-finished")
            # The model was asked with the interrupted call answered: the echo model quotes every result it got.
            snap = await idle(c, sid)
            assert "echo: back" in snap["messages"][-1]["content"]
    finally:
        server.kill()


async def _logged(log: Path, what: str) -> bool:
    return any(line[0] == what for line in log_lines(log))
