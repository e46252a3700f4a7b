"""An answer survives a restart: a graceful restart of a real `chatsync serve` on SQLite mid-answer continues the
answer (the same message, its text contiguous with what clients had), then the queue goes on in order, each
message once. Taking over is once only, and never for a run a person asked to stop; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from engine_helpers import wait_for
from servers import ServerProcess
from sqlalchemy import update
from test_lease import crashed_run, event_types, settings

from chatsync_client import TrpcClient
from server.app import open_services
from server.store.models import ChatSession, Run

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sessions"))

from branch_helpers import Viewer, snapshot_shown

LONG = " ".join(f"word{i}" for i in range(400))


async def settled(c: TrpcClient, sid: str, answers: int) -> dict:
    async def done() -> dict | None:
        snap = await c.query("session.get", {"sessionId": sid})
        finished = [m for m in snap["messages"] if m["role"] == "assistant" and m["status"] == "complete"]
        return snap if snap["run"] is None and not snap["queue"] and len(finished) == answers else None

    return await wait_for(done, timeout=60)


async def test_graceful_restart_mid_answer_continues_it(tmp_path):
    server = ServerProcess(
        tmp_path,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'restart.db'}",
        users=("erin",),
        ECHO_DELAY="0.01",
        STREAM_FLUSH_SECONDS="0.2",
        SWEEP_SECONDS="0.2",
    )
    token = server.tokens["erin"]
    url = server.url
    server.start()
    try:
        await server.ready()
        async with TrpcClient(url, token) as c, TrpcClient(url, token) as watcher:
            sid = (await c.mutation("session.create", {}))["id"]
            sub = await watcher.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
            await sub.wait_started()
            v = Viewer(sub)
            sent = await c.mutation("message.send", {"sessionId": sid, "content": LONG})
            for i in range(2):
                await c.mutation(
                    "message.send", {"sessionId": sid, "content": f"queued {i}", "clientRequestId": f"q{i}"}
                )
            await v.until(lambda v: len(v.path) == 2 and len(v.texts[v.path[1]].split()) >= 30)
            assert await server.terminate() in (0, -signal.SIGTERM)
            had = v.texts[v.path[1]]
            server.start()
            await server.ready()
            await asyncio.wait_for(c._connected.wait(), 20)
            await asyncio.wait_for(watcher._connected.wait(), 20)
            # The watcher's subscription resumes where it was (the client library resumes with lastEventId).
            snap = await settled(c, sid, 3)
            await v.caught_up(snap["lastEventId"])
        answer = snap["messages"][1]
        assert answer["runId"] == sent["runId"] and answer["content"] == LONG and answer["status"] == "complete"
        assert answer["content"].startswith(had)
        assert v.shown() == snapshot_shown(snap)
        assert [m["content"] for m in snap["messages"][2:]] == ["queued 0", "queued 0", "queued 1", "queued 1"]
        kinds = [e["type"] for e in v.seen]
        assert kinds.count("run-resumed") == 1 and "run-failed" not in kinds and "queue-paused" not in kinds
        assert [e["trigger"] for e in v.seen if e["type"] == "run-started"] == ["message", "queue", "queue"]
        assert not snap["session"]["queuePaused"]
    finally:
        server.stop()


async def test_taken_over_once_and_never_when_a_person_stopped_it(db_url):
    async with open_services(settings(db_url, resume_interrupted_answers=True)) as svc:
        alice, _ = await svc.auth.create_user("alice")
        # Continued by the sweeper: the same message, the run claimed here.
        sid, run_id = await crashed_run(svc, alice, lease_seconds=-1)  # its lease lapsed a second ago
        assert await svc.orchestrator.sweep_once() == 1
        types = await event_types(svc, sid)
        assert "run-resumed" in types and "run-failed" not in types

        async def finished() -> bool:
            snap = await svc.sessions.snapshot(alice, sid)
            return snap.run is None or snap.run.get("id") != run_id

        await wait_for(finished)
        snap = await svc.sessions.snapshot(alice, sid)
        answer = snap.messages[1]
        assert answer.content.startswith("half an ans") and answer.status == "complete"

        # Crashed again after it was continued once: it fails as before.
        sid2, run2 = await crashed_run(svc, alice, lease_seconds=-1)  # its lease lapsed a second ago
        async with svc.db.write() as s:
            await s.execute(update(Run).where(Run.id == run2).values(resumes=1))
        await svc.orchestrator.sweep_once()
        assert "run-resumed" not in await event_types(svc, sid2)
        assert "run-failed" in await event_types(svc, sid2)

        # A person asked to stop it before its process died: it ends aborted.
        sid3, _run3 = await crashed_run(svc, alice, lease_seconds=-1)  # its lease lapsed a second ago
        async with svc.db.write() as s:
            await s.execute(update(ChatSession).where(ChatSession.id == sid3).values(abort_requested=True))
        await svc.orchestrator.sweep_once()
        types = await event_types(svc, sid3)
        assert "run-aborted" in types and "run-resumed" not in types
