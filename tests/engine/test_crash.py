"""kill -9 a real `chatsync serve` mid-stream, start it again: nothing said is lost and the history stays valid.
With answers not continued after a restart (``CHATSYNC_RESUME_INTERRUPTED_ANSWERS=false``), the run fails as
``interrupted`` and the queue waits; ``test_resume.py`` has the continuation."""

from __future__ import annotations

import sqlite3
from contextlib import closing

from engine_helpers import subscribe, wait_for
from servers import ServerProcess

from chatsync_client import TrpcClient
from server.engine.history import build_request
from server.llm.convert.anthropic import to_anthropic_request
from server.llm.convert.openai import to_openai_request
from server.store.models import ChatSession, Message

LONG = " ".join(f"word{i}" for i in range(1000))


async def test_kill_9_mid_stream_then_restart(tmp_path):
    server = ServerProcess(
        tmp_path,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'crash.db'}",
        users=("erin",),
        ECHO_DELAY="0.01",
        RUN_LEASE_SECONDS="1",
        STREAM_FLUSH_SECONDS="0.2",
        SWEEP_SECONDS="0.2",
        RESUME_INTERRUPTED_ANSWERS="false",
    )
    token = server.tokens["erin"]
    url = server.url
    server.start()
    try:
        await server.ready()
        async with TrpcClient(url, token, reconnect=False) as c:
            s = await c.mutation("session.create", {})
            sid = s["id"]
            st = await subscribe(c, sid)
            run = await c.mutation("message.send", {"sessionId": sid, "content": LONG})
            for i in range(2):
                await c.mutation("message.send", {"sessionId": sid, "content": f"queued {i}"})
            await st.until_type("text-delta", 40)

            async def partial_text_flushed() -> bool:
                with closing(sqlite3.connect(tmp_path / "crash.db")) as con:
                    row = con.execute("SELECT length(content) FROM messages WHERE status = 'streaming'").fetchone()
                return bool(row and row[0])

            await wait_for(partial_text_flushed)  # the heartbeat wrote some of the answer to its row
            seen = len(st.of("text-delta"))
            server.kill()
        server.start()
        await server.ready()
        async with TrpcClient(url, token) as c:

            async def recovered():
                snap = await c.query("session.get", {"sessionId": sid})
                return snap if snap["run"] is None else None

            snap = await wait_for(recovered, timeout=15)
            user, answer = snap["messages"]
            assert user["content"] == LONG
            assert answer["status"] == "interrupted" and answer["runId"] == run["runId"]
            assert answer["error"]["code"] == "interrupted" and answer["stoppedBy"] is None
            partial = answer["content"]
            assert partial and LONG.startswith(partial) and len(partial) < len(LONG)
            assert len(partial.split()) >= seen // 2  # flushed about once every 0.2 s, so most of it
            assert [q["content"] for q in snap["queue"]] == ["queued 0", "queued 1"]
            assert snap["session"]["queuePaused"] is True and snap["session"]["status"] == "idle"
            log = await subscribe(c, sid)
            failed = await log.until(lambda e: e["type"] == "run-failed")
            assert failed["runId"] == run["runId"] and failed["error"]["code"] == "interrupted"
            await log.until(lambda e: e["type"] == "queue-paused")
            assert [e for e in log.of("message-completed") if e["message"]["id"] == answer["id"]]

            # The stored history converts into valid requests (invariant 6) ...
            rows = [
                Message(
                    id=m["id"],
                    role=m["role"],
                    content=m["content"],
                    status=m["status"],
                    tool_calls=None,
                    tool_call_id=None,
                    attachments=[],
                    is_error=False,
                )
                for m in snap["messages"]
            ] + [
                Message(
                    id="n",
                    role="user",
                    content="after the crash",
                    status="complete",
                    tool_calls=None,
                    tool_call_id=None,
                    attachments=[],
                    is_error=False,
                )
            ]
            request = build_request(ChatSession(model="m", defaults={}, tools=[], system_prompt=None), rows)
            assert [m["role"] for m in to_openai_request(request)["messages"]] == ["user", "assistant", "user"]
            assert [m["role"] for m in to_anthropic_request(request)["messages"]] == ["user", "assistant", "user"]
            # ... and the next send succeeds; then the queue continues.
            res = await c.mutation("message.send", {"sessionId": sid, "content": "after the crash"})
            assert res["status"] == "started"
            await log.until_type("run-finished", 3, timeout=20)
            snap = await c.query("session.get", {"sessionId": sid})
            assert [m["content"] for m in snap["messages"] if m["role"] == "user"] == [
                LONG,
                "after the crash",
                "queued 0",
                "queued 1",
            ]
            assert snap["messages"][3]["content"] == "after the crash" and snap["queue"] == []
    finally:
        server.stop()
