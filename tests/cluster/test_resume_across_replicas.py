"""kill -9 of the replica streaming an answer (two replicas, PostgreSQL + Redis): the other replica takes the lease
and continues the answer in the same message, from the text clients had (the shared stream buffer), and the
queue goes on after it, in order, each message once. A client of each replica ends with ``session.get``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sessions"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "engine"))

from branch_helpers import Viewer, snapshot_shown
from engine_helpers import wait_for

from chatsync_client import TrpcClient

LONG = " ".join(f"word{i}" for i in range(400))
FAST = {
    "CHATSYNC_ECHO_DELAY": "0.01",
    "CHATSYNC_RUN_LEASE_SECONDS": "1",
    "CHATSYNC_STREAM_FLUSH_SECONDS": "0.3",
    "CHATSYNC_SWEEP_SECONDS": "0.2",
}


async def test_kill_9_of_the_streaming_replica_continues_the_answer_on_the_other(cluster_factory):
    cluster = await cluster_factory(2, **FAST)
    doomed, survivor = cluster.replicas
    token = cluster.tokens["alice"]
    async with TrpcClient(survivor.url, token) as c, TrpcClient(survivor.url, token) as watcher:
        sid = (await c.mutation("session.create", {}))["id"]
        sub = await watcher.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
        await sub.wait_started()
        v = Viewer(sub)
        async with TrpcClient(doomed.url, token, reconnect=False) as d:
            doomed_sub = await d.subscribe("session.events", {"sessionId": sid, "lastEventId": "0"})
            await doomed_sub.wait_started()
            on_doomed = Viewer(doomed_sub)
            sent = await d.mutation("message.send", {"sessionId": sid, "content": LONG})  # the doomed replica drives it
            for i in range(2):
                await c.mutation(
                    "message.send", {"sessionId": sid, "content": f"queued {i}", "clientRequestId": f"q{i}"}
                )
            await v.until(lambda v: len(v.path) == 2 and len(v.texts[v.path[1]].split()) >= 30)
            await on_doomed.until(lambda v: len(v.path) == 2 and len(v.texts[v.path[1]].split()) >= 30)
            doomed.kill()
        had = v.texts[v.path[1]]

        async def settled() -> dict | None:
            snap = await c.query("session.get", {"sessionId": sid})
            done = [m for m in snap["messages"] if m["role"] == "assistant" and m["status"] == "complete"]
            return snap if snap["run"] is None and not snap["queue"] and len(done) == 3 else None

        snap = await wait_for(settled, timeout=60)
        await v.caught_up(snap["lastEventId"])
        # The doomed replica's client comes back on the survivor and resumes where it was.
        async with TrpcClient(survivor.url, token) as back:
            on_doomed.sub = await back.subscribe("session.events", {"sessionId": sid, "lastEventId": on_doomed.last_id})
            await on_doomed.sub.wait_started()
            await on_doomed.caught_up(snap["lastEventId"])
            assert on_doomed.shown() == snapshot_shown(snap)
    answer = snap["messages"][1]
    assert answer["runId"] == sent["runId"] and answer["content"] == LONG and answer["status"] == "complete"
    assert answer["content"].startswith(had)
    assert v.shown() == snapshot_shown(snap)
    assert [m["content"] for m in snap["messages"][2:]] == ["queued 0", "queued 0", "queued 1", "queued 1"]
    kinds = [e["type"] for e in v.seen]
    assert kinds.count("run-resumed") == 1 and "run-failed" not in kinds and "queue-paused" not in kinds
    assert [e["trigger"] for e in v.seen if e["type"] == "run-started"] == ["message", "queue", "queue"]
